//! The fixed lists of the enquiry (spec 2.2): each enum's serde names are its wire names, and
//! this module's test is the only place they are written out.

use poem_openapi::{Enum, registry::Registry, types::Type};
use serde::{Deserialize, Serialize};

/// The wire names of one of these lists, in declaration order, as its OpenAPI schema gives
/// them (serde's are the same: `routes::wire`'s tests hold them equal).
pub fn wire_names<T: Type>() -> Vec<String> {
    let mut registry = Registry::new();
    T::register(&mut registry);
    registry
        .schemas
        .get(&*T::name())
        .map(|schema| {
            schema
                .enum_items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// How far the applicant has got with finding a property.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "snake_case")]
#[oai(rename_all = "snake_case")]
pub enum Stage {
    ViewingProperties,
    Researching,
    ReadyToMakeAnOffer,
    OfferAccepted,
}

/// Whether the mortgage is for one applicant or several.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "snake_case")]
#[oai(rename_all = "snake_case")]
pub enum ApplicationType {
    Single,
    MultiApplicant,
}

/// Employment status of the primary applicant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "snake_case")]
#[oai(rename_all = "snake_case")]
pub enum EmploymentStatus {
    Employed,
    SelfEmployed,
    CompanyDirector,
    Contractor,
    /// Paid under the Construction Industry Scheme.
    CisWorker,
    Retired,
    Unemployed,
}

/// What the mortgage is for; it decides which other fields are required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "snake_case")]
#[oai(rename_all = "snake_case")]
pub enum MortgagePurpose {
    Purchase,
    Remortgage,
}

/// One kind of adverse credit history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "snake_case")]
#[oai(rename_all = "snake_case")]
pub enum CreditIssue {
    LowCreditScore,
    /// County Court Judgment.
    Ccj,
    Default,
    /// Individual Voluntary Arrangement.
    Iva,
    LatePaymentsNonMortgage,
    LatePaymentsMortgage,
    DebtManagementPlan,
    Repossession,
    Bankruptcy,
}

/// The buyer's situation, for a purchase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "snake_case")]
#[oai(rename_all = "snake_case")]
pub enum PurchaseType {
    HomeMover,
    FirstTimeBuyer,
    AdditionalProperty,
}

/// The government scheme a first-time buyer uses, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "snake_case")]
#[oai(rename_all = "snake_case")]
pub enum MortgageScheme {
    SharedOwnership,
    RightToBuy,
    NotSure,
    No,
}

/// Why the applicant is remortgaging; two reasons need an amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Enum)]
#[serde(rename_all = "snake_case")]
#[oai(rename_all = "snake_case")]
pub enum RemortgageReason {
    GetBetterRate,
    CurrentDealEnding,
    BorrowMoreMoney,
    ReleaseMoney,
    Other,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spec 2.2's lists, written out once: renaming a variant fails here instead of changing
    /// what partners must send.
    #[test]
    fn the_wire_names_are_the_lists_of_spec_2_2() {
        assert_eq!(
            wire_names::<Stage>(),
            [
                "viewing_properties",
                "researching",
                "ready_to_make_an_offer",
                "offer_accepted",
            ]
        );
        assert_eq!(
            wire_names::<ApplicationType>(),
            ["single", "multi_applicant"]
        );
        assert_eq!(
            wire_names::<EmploymentStatus>(),
            [
                "employed",
                "self_employed",
                "company_director",
                "contractor",
                "cis_worker",
                "retired",
                "unemployed",
            ]
        );
        assert_eq!(wire_names::<MortgagePurpose>(), ["purchase", "remortgage"]);
        assert_eq!(
            wire_names::<CreditIssue>(),
            [
                "low_credit_score",
                "ccj",
                "default",
                "iva",
                "late_payments_non_mortgage",
                "late_payments_mortgage",
                "debt_management_plan",
                "repossession",
                "bankruptcy",
            ]
        );
        assert_eq!(
            wire_names::<PurchaseType>(),
            ["home_mover", "first_time_buyer", "additional_property"]
        );
        assert_eq!(
            wire_names::<MortgageScheme>(),
            ["shared_ownership", "right_to_buy", "not_sure", "no"]
        );
        assert_eq!(
            wire_names::<RemortgageReason>(),
            [
                "get_better_rate",
                "current_deal_ending",
                "borrow_more_money",
                "release_money",
                "other",
            ]
        );
    }
}

//! The fixed lists of the enquiry (spec 2.2), as the intake-api parses and documents them and
//! the partner client sends them: each enum's serde names are its wire names (with the
//! `openapi` feature, its OpenAPI names too), and this module's test is the only place they
//! are written out.

use serde::{Deserialize, Serialize};

/// The wire names of one of these lists, in declaration order, as its OpenAPI schema gives
/// them (serde's are the same: the test below holds them equal).
#[cfg(feature = "openapi")]
pub fn wire_names<T: poem_openapi::types::Type>() -> Vec<String> {
    let mut registry = poem_openapi::registry::Registry::new();
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum Stage {
    /// `viewing_properties`
    ViewingProperties,
    /// `researching`
    Researching,
    /// `ready_to_make_an_offer`
    ReadyToMakeAnOffer,
    /// `offer_accepted`
    OfferAccepted,
}

/// Whether the mortgage is for one applicant or several.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum ApplicationType {
    /// `single`
    Single,
    /// `multi_applicant`
    MultiApplicant,
}

/// Employment status of the primary applicant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum EmploymentStatus {
    /// `employed`
    Employed,
    /// `self_employed`
    SelfEmployed,
    /// `company_director`
    CompanyDirector,
    /// `contractor`
    Contractor,
    /// `cis_worker`
    CisWorker,
    /// `retired`
    Retired,
    /// `unemployed`
    Unemployed,
}

/// What the mortgage is for; it decides which other fields are required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum MortgagePurpose {
    /// `purchase`: needs `purchase_type`, `new_property_value` and `deposit_amount`.
    Purchase,
    /// `remortgage`: needs `remortgage_reason`, `current_property_value` and
    /// `outstanding_mortgage_amount`.
    Remortgage,
}

/// One kind of adverse credit history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum CreditIssue {
    /// `low_credit_score`
    LowCreditScore,
    /// `ccj`
    Ccj,
    /// `default`
    Default,
    /// `iva`
    Iva,
    /// `late_payments_non_mortgage`
    LatePaymentsNonMortgage,
    /// `late_payments_mortgage`
    LatePaymentsMortgage,
    /// `debt_management_plan`
    DebtManagementPlan,
    /// `repossession`
    Repossession,
    /// `bankruptcy`
    Bankruptcy,
}

/// The buyer's situation, for a purchase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum PurchaseType {
    /// `home_mover`
    HomeMover,
    /// `first_time_buyer`: needs a `mortgage_scheme`.
    FirstTimeBuyer,
    /// `additional_property`
    AdditionalProperty,
}

/// The government scheme a first-time buyer uses, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum MortgageScheme {
    /// `shared_ownership`
    SharedOwnership,
    /// `right_to_buy`
    RightToBuy,
    /// `not_sure`
    NotSure,
    /// `no`: no scheme.
    No,
}

/// Why the applicant is remortgaging; two reasons need an amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(poem_openapi::Enum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", oai(rename_all = "snake_case"))]
pub enum RemortgageReason {
    /// `get_better_rate`
    GetBetterRate,
    /// `current_deal_ending`
    CurrentDealEnding,
    /// `borrow_more_money`: needs `additional_borrowing_amount`.
    BorrowMoreMoney,
    /// `release_money`: needs `release_borrowing_amount`.
    ReleaseMoney,
    /// `other`
    Other,
}

#[cfg(all(test, feature = "openapi"))]
mod tests {
    use serde::de::DeserializeOwned;

    use super::*;

    /// The wire names of `T`, each checked to be serde's name for the same value.
    fn wire_names<T: poem_openapi::types::Type + Serialize + DeserializeOwned>() -> Vec<String> {
        let names = super::wire_names::<T>();
        for name in &names {
            let value: T = serde_json::from_value(name.as_str().into()).expect(name);
            assert_eq!(serde_json::to_value(value).unwrap(), name.as_str());
        }
        names
    }

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

//! The fixed lists of the enquiry (spec 2.2): each enum's serde names are its wire names, the
//! only place they are written.

use poem_openapi::Enum;
use serde::{Deserialize, Serialize};

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

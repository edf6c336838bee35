//! The enquiry and attach request bodies, parsed from untyped JSON into domain values.
//!
//! Parsing reports every problem at once, each on its own field path, with Laravel's wording:
//! partners migrating from the original service already show those messages to their users.

use std::fmt::{self, Write as _};

use chrono::NaiveDate;
use poem_openapi::Enum;
use serde::de::value::StrDeserializer;
use serde::de::{DeserializeOwned, IntoDeserializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::errors::ValidationErrors;

/// Longest accepted name or address line, the column size partners were used to.
const MAX_TEXT: usize = 255;
/// Longest accepted postcode: room for any country's format, not for free text.
const MAX_POSTCODE: usize = 16;
/// Longest deliverable e-mail address (RFC 5321 path limit).
const MAX_EMAIL: usize = 254;
/// Cap on array fields, so one body cannot make us build thousands of rows or messages.
const MAX_ITEMS: usize = 20;

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

/// An e-mail address, trimmed and lower-cased because together with the brand it identifies a case.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct Email(String);

/// Why a string is not accepted as an e-mail address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a plausible e-mail address")]
pub struct InvalidEmail;

impl Email {
    /// The only constructor, so every `Email` in the system is plausible and normalised alike.
    pub fn parse(raw: &str) -> Result<Self, InvalidEmail> {
        let email = raw.trim().to_lowercase();
        // Deliberately loose: only delivery proves an address, and a rejected enquiry is a lost
        // customer, so refuse just what cannot be an address.
        let plausible = email.chars().count() <= MAX_EMAIL
            && !email.chars().any(char::is_whitespace)
            && email.split_once('@').is_some_and(|(local, domain)| {
                !local.is_empty()
                    && !domain.contains('@')
                    && domain.contains('.')
                    && domain.split('.').all(|label| !label.is_empty())
            });
        if plausible {
            Ok(Self(email))
        } else {
            Err(InvalidEmail)
        }
    }

    /// The normalised address.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Email {
    type Error = InvalidEmail;

    fn try_from(raw: String) -> Result<Self, Self::Error> {
        Self::parse(&raw)
    }
}

impl AsRef<str> for Email {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A mobile number reduced to an optional leading `+` and its digits, so formatting never matters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct MobileNumber(String);

/// Why a string is not accepted as a mobile number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a plausible phone number")]
pub struct InvalidMobileNumber;

impl MobileNumber {
    /// The only constructor: 7 to 15 digits (E.164 allows 15) once separators are removed.
    pub fn parse(raw: &str) -> Result<Self, InvalidMobileNumber> {
        let compact: String = raw
            .chars()
            .filter(|c| !matches!(c, ' ' | '-' | '(' | ')'))
            .collect();
        let digits = compact.strip_prefix('+').unwrap_or(&compact);
        if (7..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) {
            Ok(Self(compact))
        } else {
            Err(InvalidMobileNumber)
        }
    }

    /// The compact number.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for MobileNumber {
    type Error = InvalidMobileNumber;

    fn try_from(raw: String) -> Result<Self, Self::Error> {
        Self::parse(&raw)
    }
}

/// A brand identifier; brands are configuration, so only `parse` checks membership.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Brand(String);

impl Brand {
    /// Accepts exactly one of the configured brand identifiers.
    pub fn parse(raw: &str, brands: &[&str]) -> Option<Self> {
        brands.contains(&raw).then(|| Self(raw.to_owned()))
    }

    /// The identifier as configured.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A parsed enquiry (spec 2.2): every rule holds, and conditional fields exist only when required.
///
/// `terms_agreement` is not kept: it can only have been `true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Enquiry {
    /// One of the configured brands.
    pub brand: Brand,
    /// Applicant first name, trimmed.
    pub first_name: String,
    /// Applicant last name, trimmed.
    pub last_name: String,
    /// Applicant e-mail address.
    pub email: Email,
    /// Applicant mobile phone number.
    pub mobile_number: MobileNumber,
    /// Applicant date of birth, in the past.
    pub date_of_birth: NaiveDate,
    /// How far the applicant has got.
    pub stage: Stage,
    /// Single or multiple applicants.
    pub application_type: ApplicationType,
    /// Status of the primary applicant.
    pub employment_status: EmploymentStatus,
    /// Combined estimated income of all applicants.
    pub total_annual_income: f64,
    /// The purpose with the fields only it needs (flattened: `mortgage_purpose` is the tag).
    #[serde(flatten)]
    pub mortgage: Mortgage,
    /// `Some` and non-empty exactly when the applicant declared credit issues.
    pub credit_issues: Option<Vec<CreditIssue>>,
    /// Product chosen in the eligibility engine.
    pub product_uuid: Option<Uuid>,
    /// Consent to a credit check; an omitted value means no consent.
    pub credit_check_consent: bool,
    /// `None` when none were sent, so an update leaves the case's addresses alone.
    pub addresses: Option<Vec<Address>>,
}

impl Enquiry {
    /// The `has_credit_issues` the partner sent, which `credit_issues` already encodes.
    pub fn has_credit_issues(&self) -> bool {
        self.credit_issues.is_some()
    }
}

/// The mortgage purpose together with the fields only that purpose needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mortgage_purpose", rename_all = "snake_case")]
pub enum Mortgage {
    /// Buying a property.
    Purchase(Purchase),
    /// Replacing the mortgage on a property already owned.
    Remortgage(Remortgage),
}

impl Mortgage {
    /// The purpose as sent on the wire.
    pub fn purpose(&self) -> MortgagePurpose {
        match self {
            Self::Purchase(_) => MortgagePurpose::Purchase,
            Self::Remortgage(_) => MortgagePurpose::Remortgage,
        }
    }
}

/// The fields of a purchase enquiry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Purchase {
    /// The buyer's situation.
    pub purchase_type: PurchaseType,
    /// `Some` exactly when `purchase_type` is `first_time_buyer`.
    pub mortgage_scheme: Option<MortgageScheme>,
    /// Approximate value of the new property or estimated budget.
    pub new_property_value: f64,
    /// Approximate combined deposit of the applicants.
    pub deposit_amount: f64,
}

/// The fields of a remortgage enquiry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Remortgage {
    /// Why the applicant is remortgaging.
    pub remortgage_reason: RemortgageReason,
    /// Approximate value of the remortgaged property.
    pub current_property_value: f64,
    /// Approximate amount left on the existing mortgage.
    pub outstanding_mortgage_amount: f64,
    /// `Some` exactly when the reason is `borrow_more_money`.
    pub additional_borrowing_amount: Option<f64>,
    /// `Some` exactly when the reason is `release_money`.
    pub release_borrowing_amount: Option<f64>,
}

/// One applicant address; text is trimmed and blank optional lines are `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Address {
    /// First address line.
    pub line_1: String,
    /// Second address line.
    pub line_2: Option<String>,
    /// Third address line.
    pub line_3: Option<String>,
    /// Town or city.
    pub town_city: Option<String>,
    /// County.
    pub county: Option<String>,
    /// Country.
    pub country: Option<String>,
    /// Postcode, as sent (trimmed).
    pub postcode: String,
    /// When the applicant moved in.
    pub date_moved_in: Option<NaiveDate>,
    /// When the applicant moved out; never before `date_moved_in`.
    pub date_moved_out: Option<NaiveDate>,
}

/// A parsed attach request (spec 4.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachRequest {
    /// Identifies the case (with any brand).
    pub email: Email,
    /// Product chosen in the eligibility engine.
    pub product_uuid: Uuid,
}

/// Parses an enquiry body; `brands` are the configured brand identifiers and `today` bounds the
/// date of birth (injected so tests do not depend on the clock).
pub fn parse_enquiry(
    body: &Value,
    brands: &[&str],
    today: NaiveDate,
) -> Result<Enquiry, ValidationErrors> {
    let mut errors = ValidationErrors::default();
    let mut fields = Fields::root(body, &mut errors);
    let f = &mut fields;

    let brand = f.required("brand", |v, attr| {
        Brand::parse(string(v, attr)?, brands).ok_or_else(|| invalid_choice(attr))
    });
    let first_name = f.required("first_name", text);
    let last_name = f.required("last_name", text);
    let email = f.required("email", email);
    let mobile_number = f.required("mobile_number", |v, attr| {
        MobileNumber::parse(string(v, attr)?)
            .map_err(|_| format!("The {attr} field must be a valid phone number."))
    });
    let date_of_birth = f.required("date_of_birth", |v, attr| {
        let born = date(v, attr)?;
        (born < today)
            .then_some(born)
            .ok_or_else(|| format!("The {attr} field must be a date before today."))
    });
    f.required("terms_agreement", |v, attr| {
        flag(v, attr)?
            .then_some(())
            .ok_or_else(|| format!("The {attr} field must be accepted."))
    });
    let stage = f.required("stage", choice);
    let application_type = f.required("application_type", choice);
    let employment_status = f.required("employment_status", choice);
    let total_annual_income = f.required("total_annual_income", amount);
    let mortgage = match f.required("mortgage_purpose", choice) {
        Some(MortgagePurpose::Purchase) => purchase(f).map(Mortgage::Purchase),
        Some(MortgagePurpose::Remortgage) => remortgage(f).map(Mortgage::Remortgage),
        None => None,
    };
    let has_credit_issues = f.required("has_credit_issues", flag);
    let credit_issues = when(has_credit_issues, || {
        let condition = ("has_credit_issues", "true");
        let items = f.required_if("credit_issues", condition, |v, attr| array(v, attr, 1))?;
        f.each("credit_issues", items, |f, key, item| {
            f.check(key, item, choice)
        })
    });
    let product_uuid = f.optional("product_uuid", hyphenated_uuid);
    let credit_check_consent = f.optional("credit_check_consent", flag);
    let addresses = addresses(f);

    // Every `None` above has recorded its error; `finish` refuses the result when any exists.
    let enquiry = (|| {
        Some(Enquiry {
            brand: brand?,
            first_name: first_name?,
            last_name: last_name?,
            email: email?,
            mobile_number: mobile_number?,
            date_of_birth: date_of_birth?,
            stage: stage?,
            application_type: application_type?,
            employment_status: employment_status?,
            total_annual_income: total_annual_income?,
            mortgage: mortgage?,
            credit_issues: credit_issues?,
            product_uuid,
            credit_check_consent: credit_check_consent.unwrap_or(false),
            addresses,
        })
    })();
    finish(enquiry, errors)
}

/// Parses an attach body: both fields are required.
pub fn parse_attach(body: &Value) -> Result<AttachRequest, ValidationErrors> {
    let mut errors = ValidationErrors::default();
    let mut fields = Fields::root(body, &mut errors);
    let email = fields.required("email", email);
    let product_uuid = fields.required("product_uuid", hyphenated_uuid);
    let request = email
        .zip(product_uuid)
        .map(|(email, product_uuid)| AttachRequest {
            email,
            product_uuid,
        });
    finish(request, errors)
}

fn purchase(f: &mut Fields<'_, '_>) -> Option<Purchase> {
    let when = ("mortgage_purpose", "purchase");
    let purchase_type = f.required_if("purchase_type", when, choice);
    let mortgage_scheme = when_is(purchase_type, PurchaseType::FirstTimeBuyer, || {
        f.required_if(
            "mortgage_scheme",
            ("purchase_type", "first_time_buyer"),
            choice,
        )
    });
    let new_property_value = f.required_if("new_property_value", when, amount);
    let deposit_amount = f.required_if("deposit_amount", when, amount);
    Some(Purchase {
        purchase_type: purchase_type?,
        mortgage_scheme: mortgage_scheme?,
        new_property_value: new_property_value?,
        deposit_amount: deposit_amount?,
    })
}

fn remortgage(f: &mut Fields<'_, '_>) -> Option<Remortgage> {
    let when = ("mortgage_purpose", "remortgage");
    let reason = f.required_if("remortgage_reason", when, choice);
    let current_property_value = f.required_if("current_property_value", when, amount);
    let outstanding = f.required_if("outstanding_mortgage_amount", when, amount);
    let additional = when_is(reason, RemortgageReason::BorrowMoreMoney, || {
        let when = ("remortgage_reason", "borrow_more_money");
        f.required_if("additional_borrowing_amount", when, amount)
    });
    let release = when_is(reason, RemortgageReason::ReleaseMoney, || {
        f.required_if(
            "release_borrowing_amount",
            ("remortgage_reason", "release_money"),
            amount,
        )
    });
    Some(Remortgage {
        remortgage_reason: reason?,
        current_property_value: current_property_value?,
        outstanding_mortgage_amount: outstanding?,
        additional_borrowing_amount: additional?,
        release_borrowing_amount: release?,
    })
}

/// `None` when absent or invalid (the error is recorded), else the non-empty list.
fn addresses(f: &mut Fields<'_, '_>) -> Option<Vec<Address>> {
    let items = f.optional("addresses", |v, attr| array(v, attr, 1))?;
    f.each("addresses", items, |f, key, item| {
        let obj = f.check(key, item, |v, attr| {
            v.as_object()
                .ok_or_else(|| format!("The {attr} field must be an object."))
        })?;
        let mut nested = Fields {
            obj: Some(obj),
            prefix: format!("{}{key}.", f.prefix),
            errors: &mut *f.errors,
        };
        address(&mut nested)
    })
}

fn address(f: &mut Fields<'_, '_>) -> Option<Address> {
    let line_1 = f.required("line_1", text);
    let [line_2, line_3, town_city, county, country] =
        ["line_2", "line_3", "town_city", "county", "country"].map(|key| f.optional(key, text));
    let postcode = f.required("postcode", |v, attr| bounded_text(v, attr, MAX_POSTCODE));
    let date_moved_in = f.optional("date_moved_in", date);
    let date_moved_out = f.optional("date_moved_out", date);
    if let (Some(moved_in), Some(moved_out)) = (date_moved_in, date_moved_out)
        && moved_out < moved_in
    {
        let message = format!(
            "The {} field must be a date after or equal to {}.",
            f.attr("date_moved_out"),
            f.attr("date_moved_in")
        );
        f.errors.add(f.path("date_moved_out"), message);
    }
    Some(Address {
        line_1: line_1?,
        line_2,
        line_3,
        town_city,
        county,
        country,
        postcode: postcode?,
        date_moved_in,
        date_moved_out,
    })
}

/// One JSON object being read, with the path prefix its problems are recorded under.
struct Fields<'v, 'e> {
    /// `None` when the body is not an object: then every field is simply missing.
    obj: Option<&'v Map<String, Value>>,
    prefix: String,
    errors: &'e mut ValidationErrors,
}

impl<'v> Fields<'v, '_> {
    fn root<'e>(body: &'v Value, errors: &'e mut ValidationErrors) -> Fields<'v, 'e> {
        Fields {
            obj: body.as_object(),
            prefix: String::new(),
            errors,
        }
    }

    fn path(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    fn attr<'a>(&'a self, key: &'a str) -> Attr<'a> {
        Attr {
            prefix: &self.prefix,
            key,
        }
    }

    /// The field's value; null and blank strings count as not sent, as partners' forms send them
    /// for fields left empty.
    fn get(&self, key: &str) -> Option<&'v Value> {
        let blank = |v: &Value| match v {
            Value::Null => true,
            Value::String(s) => s.trim().is_empty(),
            _ => false,
        };
        self.obj?.get(key).filter(|v| !blank(v))
    }

    /// Parses a value that was sent, recording the parser's message at the field's path.
    fn check<T>(
        &mut self,
        key: &str,
        value: &'v Value,
        parse: impl FnOnce(&'v Value, Attr<'_>) -> Result<T, String>,
    ) -> Option<T> {
        match parse(value, self.attr(key)) {
            Ok(parsed) => Some(parsed),
            Err(message) => {
                let path = self.path(key);
                self.errors.add(path, message);
                None
            }
        }
    }

    fn optional<T>(
        &mut self,
        key: &str,
        parse: impl FnOnce(&'v Value, Attr<'_>) -> Result<T, String>,
    ) -> Option<T> {
        let value = self.get(key)?;
        self.check(key, value, parse)
    }

    fn required<T>(
        &mut self,
        key: &str,
        parse: impl FnOnce(&'v Value, Attr<'_>) -> Result<T, String>,
    ) -> Option<T> {
        self.demand(key, None, parse)
    }

    /// Like `required`, for a field whose condition (`other` has `value`) is known to hold.
    fn required_if<T>(
        &mut self,
        key: &str,
        condition: (&str, &str),
        parse: impl FnOnce(&'v Value, Attr<'_>) -> Result<T, String>,
    ) -> Option<T> {
        self.demand(key, Some(condition), parse)
    }

    fn demand<T>(
        &mut self,
        key: &str,
        condition: Option<(&str, &str)>,
        parse: impl FnOnce(&'v Value, Attr<'_>) -> Result<T, String>,
    ) -> Option<T> {
        if let Some(value) = self.get(key) {
            return self.check(key, value, parse);
        }
        let attr = self.attr(key);
        let message = match condition {
            None => format!("The {attr} field is required."),
            Some((other, value)) => format!(
                "The {attr} field is required when {} is {value}.",
                Attr::top(other)
            ),
        };
        self.errors.add(self.path(key), message);
        None
    }

    /// Parses every element at its own path (`key.N`), so one bad element hides no other.
    fn each<T>(
        &mut self,
        key: &str,
        items: &'v [Value],
        mut parse: impl FnMut(&mut Self, &str, &'v Value) -> Option<T>,
    ) -> Option<Vec<T>> {
        let parsed: Vec<Option<T>> = items
            .iter()
            .enumerate()
            .map(|(index, item)| parse(self, &format!("{key}.{index}"), item))
            .collect();
        parsed.into_iter().collect()
    }
}

/// Laravel's display name for a field's path: underscores become spaces. Written only into
/// a message: most fields are valid, and a name built for each would be allocations wasted.
#[derive(Clone, Copy)]
struct Attr<'a> {
    prefix: &'a str,
    key: &'a str,
}

impl<'a> Attr<'a> {
    /// A field of the body itself.
    fn top(key: &'a str) -> Self {
        Self { prefix: "", key }
    }
}

impl fmt::Display for Attr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in [self.prefix, self.key] {
            for (i, piece) in part.split('_').enumerate() {
                if i > 0 {
                    f.write_char(' ')?;
                }
                f.write_str(piece)?;
            }
        }
        Ok(())
    }
}

fn finish<T>(value: Option<T>, errors: ValidationErrors) -> Result<T, ValidationErrors> {
    match value {
        Some(value) if errors.is_empty() => Ok(value),
        _ => Err(errors),
    }
}

/// Reads a conditional field: `Some(None)` when its condition is false, `None` when the
/// condition's own field is invalid (already reported) or the field itself is.
fn when<T>(condition: Option<bool>, read: impl FnOnce() -> Option<T>) -> Option<Option<T>> {
    match condition? {
        true => read().map(Some),
        false => Some(None),
    }
}

/// `when`, for a condition that a choice field has one particular value.
fn when_is<C: PartialEq, T>(
    choice: Option<C>,
    expected: C,
    read: impl FnOnce() -> Option<T>,
) -> Option<Option<T>> {
    when(choice.map(|choice| choice == expected), read)
}

fn string<'v>(value: &'v Value, attr: Attr<'_>) -> Result<&'v str, String> {
    value
        .as_str()
        .map(str::trim)
        .ok_or_else(|| format!("The {attr} field must be a string."))
}

fn bounded_text(value: &Value, attr: Attr<'_>, max: usize) -> Result<String, String> {
    let text = string(value, attr)?;
    if text.chars().count() > max {
        return Err(format!(
            "The {attr} field must not be greater than {max} characters."
        ));
    }
    Ok(text.to_owned())
}

fn text(value: &Value, attr: Attr<'_>) -> Result<String, String> {
    bounded_text(value, attr, MAX_TEXT)
}

fn email(value: &Value, attr: Attr<'_>) -> Result<Email, String> {
    Email::parse(string(value, attr)?)
        .map_err(|_| format!("The {attr} field must be a valid email address."))
}

fn hyphenated_uuid(value: &Value, attr: Attr<'_>) -> Result<Uuid, String> {
    let raw = string(value, attr)?;
    // Only the hyphenated form: the braced, URN and bare forms `Uuid` also takes are not UUID
    // strings as partners' validators (and ours, in the OpenAPI document) understand them.
    Some(raw)
        .filter(|raw| raw.len() == 36)
        .and_then(|raw| Uuid::try_parse(raw).ok())
        .ok_or_else(|| format!("The {attr} field must be a valid UUID."))
}

fn flag(value: &Value, attr: Attr<'_>) -> Result<bool, String> {
    value
        .as_bool()
        .ok_or_else(|| format!("The {attr} field must be true or false."))
}

fn amount(value: &Value, attr: Attr<'_>) -> Result<f64, String> {
    let amount = value
        .as_f64()
        .filter(|amount| amount.is_finite())
        .ok_or_else(|| format!("The {attr} field must be a number."))?;
    if amount < 0.0 {
        return Err(format!("The {attr} field must be at least 0."));
    }
    Ok(amount)
}

fn invalid_choice(attr: Attr<'_>) -> String {
    format!("The selected {attr} is invalid.")
}

/// One of an enum's wire names; the serde names are the single source of them.
fn choice<T: DeserializeOwned>(value: &Value, attr: Attr<'_>) -> Result<T, String> {
    let raw: StrDeserializer<'_, serde::de::value::Error> =
        string(value, attr)?.into_deserializer();
    T::deserialize(raw).map_err(|_| invalid_choice(attr))
}

/// Strictly `YYYY-MM-DD`: chrono alone would also take unpadded or signed years.
fn date(value: &Value, attr: Attr<'_>) -> Result<NaiveDate, String> {
    let raw = string(value, attr)?;
    let shaped = raw.len() == 10
        && raw.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        });
    // Shaped, the parts are plain digits: read them directly rather than through chrono's
    // format-string parser, which costs about twenty times as much.
    let part = |at: std::ops::Range<usize>| raw[at].parse::<u32>().ok();
    shaped
        .then(|| NaiveDate::from_ymd_opt(part(0..4)? as i32, part(5..7)?, part(8..10)?))
        .flatten()
        .ok_or_else(|| format!("The {attr} field must be a valid date in the format YYYY-MM-DD."))
}

fn array<'v>(value: &'v Value, attr: Attr<'_>, min: usize) -> Result<&'v [Value], String> {
    let items = value
        .as_array()
        .ok_or_else(|| format!("The {attr} field must be an array."))?;
    if items.len() < min {
        return Err(format!("The {attr} field must have at least {min} items."));
    }
    if items.len() > MAX_ITEMS {
        return Err(format!(
            "The {attr} field must not have more than {MAX_ITEMS} items."
        ));
    }
    Ok(items)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    const BRANDS: &[&str] = &["brand_a", "brand_b"];

    fn day(iso: &str) -> NaiveDate {
        iso.parse().expect("test dates are valid")
    }

    fn today() -> NaiveDate {
        day("2025-06-15")
    }

    fn parse(body: &Value) -> Result<Enquiry, ValidationErrors> {
        parse_enquiry(body, BRANDS, today())
    }

    /// `base` with the top-level keys of `patch` replaced (a `null` in `patch` is sent as null).
    fn with(mut base: Value, patch: Value) -> Value {
        if let (Some(base), Value::Object(patch)) = (base.as_object_mut(), patch) {
            base.extend(patch);
        }
        base
    }

    fn errors(entries: &[(&str, &str)]) -> BTreeMap<String, Vec<String>> {
        let mut map = BTreeMap::<String, Vec<String>>::new();
        for (path, message) in entries {
            map.entry(path.to_string())
                .or_default()
                .push(message.to_string());
        }
        map
    }

    fn error_map(body: &Value) -> BTreeMap<String, Vec<String>> {
        parse(body)
            .err()
            .map(ValidationErrors::into_map)
            .unwrap_or_default()
    }

    fn address() -> Value {
        json!({
            "line_1": " 1 High Street ",
            "line_2": "",
            "town_city": "Leeds",
            "postcode": "LS1 1AA",
            "date_moved_in": "2015-01-01",
            "date_moved_out": "2020-01-01"
        })
    }

    fn purchase_body() -> Value {
        json!({
            "brand": "brand_a",
            "first_name": " Jane ",
            "last_name": "Doe",
            "email": " Jane.Doe@Example.COM ",
            "mobile_number": "+44 (0)7700-900123",
            "date_of_birth": "1990-05-17",
            "terms_agreement": true,
            "stage": "offer_accepted",
            "application_type": "single",
            "employment_status": "cis_worker",
            "total_annual_income": 52000.5,
            "mortgage_purpose": "purchase",
            "purchase_type": "first_time_buyer",
            "mortgage_scheme": "shared_ownership",
            "new_property_value": 250000,
            "deposit_amount": 25000,
            "has_credit_issues": true,
            "credit_issues": ["ccj", "late_payments_non_mortgage"],
            "product_uuid": "67e55044-10b1-426f-9247-bb680e5fe0c8",
            "credit_check_consent": true,
            "addresses": [address()],
            "utm_source": "unknown fields are ignored"
        })
    }

    fn remortgage_body() -> Value {
        json!({
            "brand": "brand_b",
            "first_name": "John",
            "last_name": "Smith",
            "email": "john@example.co.uk",
            "mobile_number": "07700900123",
            "date_of_birth": "1980-12-31",
            "terms_agreement": true,
            "stage": "researching",
            "application_type": "multi_applicant",
            "employment_status": "self_employed",
            "total_annual_income": 0,
            "mortgage_purpose": "remortgage",
            "remortgage_reason": "borrow_more_money",
            "current_property_value": 400000,
            "outstanding_mortgage_amount": 150000.75,
            "additional_borrowing_amount": 30000,
            "has_credit_issues": false
        })
    }

    /// A valid purchase enquiry, every field set.
    pub(crate) fn purchase_enquiry() -> Enquiry {
        Enquiry {
            brand: Brand("brand_a".into()),
            first_name: "Jane".into(),
            last_name: "Doe".into(),
            email: Email("jane.doe@example.com".into()),
            mobile_number: MobileNumber("+4407700900123".into()),
            date_of_birth: day("1990-05-17"),
            stage: Stage::OfferAccepted,
            application_type: ApplicationType::Single,
            employment_status: EmploymentStatus::CisWorker,
            total_annual_income: 52000.5,
            mortgage: Mortgage::Purchase(Purchase {
                purchase_type: PurchaseType::FirstTimeBuyer,
                mortgage_scheme: Some(MortgageScheme::SharedOwnership),
                new_property_value: 250000.0,
                deposit_amount: 25000.0,
            }),
            credit_issues: Some(vec![CreditIssue::Ccj, CreditIssue::LatePaymentsNonMortgage]),
            product_uuid: Some(Uuid::from_u128(0x67e55044_10b1_426f_9247_bb680e5fe0c8)),
            credit_check_consent: true,
            addresses: Some(vec![Address {
                line_1: "1 High Street".into(),
                line_2: None,
                line_3: None,
                town_city: Some("Leeds".into()),
                county: None,
                country: None,
                postcode: "LS1 1AA".into(),
                date_moved_in: Some(day("2015-01-01")),
                date_moved_out: Some(day("2020-01-01")),
            }]),
        }
    }

    /// One case per rule: a valid body broken in exactly one way, and the one error it must give.
    #[rustfmt::skip]
    fn rule_cases() -> Vec<(&'static str, Value, &'static str, &'static str)> {
        let p = |patch: Value| with(purchase_body(), patch);
        let r = |patch: Value| with(remortgage_body(), patch);
        let a = |patch: Value| p(json!({"addresses": [with(address(), patch)]}));
        vec![
            ("brand_is_required", p(json!({"brand": null})),
                "brand", "The brand field is required."),
            ("brand_not_configured_is_rejected", p(json!({"brand": "brand_c"})),
                "brand", "The selected brand is invalid."),
            ("brand_is_case_sensitive", p(json!({"brand": "Brand_A"})),
                "brand", "The selected brand is invalid."),
            ("first_name_null_counts_as_missing", p(json!({"first_name": null})),
                "first_name", "The first name field is required."),
            ("first_name_blank_counts_as_missing", p(json!({"first_name": "   "})),
                "first_name", "The first name field is required."),
            ("first_name_longer_than_255_characters_is_rejected", p(json!({"first_name": "é".repeat(256)})),
                "first_name", "The first name field must not be greater than 255 characters."),
            ("last_name_must_be_a_string", p(json!({"last_name": 42})),
                "last_name", "The last name field must be a string."),
            ("email_is_required", p(json!({"email": ""})),
                "email", "The email field is required."),
            ("email_without_at_sign_is_rejected", p(json!({"email": "jane.example.com"})),
                "email", "The email field must be a valid email address."),
            ("email_with_two_at_signs_is_rejected", p(json!({"email": "jane@doe@example.com"})),
                "email", "The email field must be a valid email address."),
            ("email_with_empty_local_part_is_rejected", p(json!({"email": "@example.com"})),
                "email", "The email field must be a valid email address."),
            ("email_domain_without_dot_is_rejected", p(json!({"email": "jane@localhost"})),
                "email", "The email field must be a valid email address."),
            ("email_domain_with_empty_label_is_rejected", p(json!({"email": "jane@example..com"})),
                "email", "The email field must be a valid email address."),
            ("email_with_inner_whitespace_is_rejected", p(json!({"email": "jane doe@example.com"})),
                "email", "The email field must be a valid email address."),
            ("email_longer_than_254_characters_is_rejected", p(json!({"email": format!("{}@example.com", "a".repeat(243))})),
                "email", "The email field must be a valid email address."),
            ("mobile_number_with_6_digits_is_rejected", p(json!({"mobile_number": "123 456"})),
                "mobile_number", "The mobile number field must be a valid phone number."),
            ("mobile_number_with_16_digits_is_rejected", p(json!({"mobile_number": "+1234567890123456"})),
                "mobile_number", "The mobile number field must be a valid phone number."),
            ("mobile_number_with_letters_is_rejected", p(json!({"mobile_number": "07700 90012a"})),
                "mobile_number", "The mobile number field must be a valid phone number."),
            ("mobile_number_plus_not_leading_is_rejected", p(json!({"mobile_number": "44+7700900123"})),
                "mobile_number", "The mobile number field must be a valid phone number."),
            ("mobile_number_as_json_number_is_rejected", p(json!({"mobile_number": 7700900123_u64})),
                "mobile_number", "The mobile number field must be a string."),
            ("date_of_birth_is_required", p(json!({"date_of_birth": null})),
                "date_of_birth", "The date of birth field is required."),
            ("date_of_birth_unpadded_is_rejected", p(json!({"date_of_birth": "1990-5-17"})),
                "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
            ("date_of_birth_not_on_the_calendar_is_rejected", p(json!({"date_of_birth": "1990-02-30"})),
                "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
            ("date_of_birth_in_month_13_is_rejected", p(json!({"date_of_birth": "1990-13-01"})),
                "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
            ("date_of_birth_on_day_0_is_rejected", p(json!({"date_of_birth": "1990-05-00"})),
                "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
            ("date_of_birth_with_a_time_is_rejected", p(json!({"date_of_birth": "1990-05-17T00:00:00Z"})),
                "date_of_birth", "The date of birth field must be a valid date in the format YYYY-MM-DD."),
            ("date_of_birth_today_is_rejected", p(json!({"date_of_birth": "2025-06-15"})),
                "date_of_birth", "The date of birth field must be a date before today."),
            ("date_of_birth_in_the_future_is_rejected", p(json!({"date_of_birth": "2030-01-01"})),
                "date_of_birth", "The date of birth field must be a date before today."),
            ("terms_agreement_is_required", p(json!({"terms_agreement": null})),
                "terms_agreement", "The terms agreement field is required."),
            ("terms_agreement_false_is_not_accepted", p(json!({"terms_agreement": false})),
                "terms_agreement", "The terms agreement field must be accepted."),
            ("terms_agreement_as_string_is_not_a_boolean", p(json!({"terms_agreement": "true"})),
                "terms_agreement", "The terms agreement field must be true or false."),
            ("stage_is_required", p(json!({"stage": null})),
                "stage", "The stage field is required."),
            ("stage_outside_the_list_is_rejected", p(json!({"stage": "browsing"})),
                "stage", "The selected stage is invalid."),
            ("application_type_outside_the_list_is_rejected", p(json!({"application_type": "joint"})),
                "application_type", "The selected application type is invalid."),
            ("employment_status_outside_the_list_is_rejected", p(json!({"employment_status": "student"})),
                "employment_status", "The selected employment status is invalid."),
            ("employment_status_is_case_sensitive", p(json!({"employment_status": "Employed"})),
                "employment_status", "The selected employment status is invalid."),
            ("total_annual_income_is_required", p(json!({"total_annual_income": null})),
                "total_annual_income", "The total annual income field is required."),
            ("total_annual_income_negative_is_rejected", p(json!({"total_annual_income": -1})),
                "total_annual_income", "The total annual income field must be at least 0."),
            ("total_annual_income_as_string_is_not_a_number", p(json!({"total_annual_income": "52000"})),
                "total_annual_income", "The total annual income field must be a number."),
            ("mortgage_purpose_is_required", p(json!({"mortgage_purpose": null})),
                "mortgage_purpose", "The mortgage purpose field is required."),
            ("mortgage_purpose_outside_the_list_is_rejected", p(json!({"mortgage_purpose": "buy_to_let"})),
                "mortgage_purpose", "The selected mortgage purpose is invalid."),
            ("has_credit_issues_is_required", p(json!({"has_credit_issues": null})),
                "has_credit_issues", "The has credit issues field is required."),
            ("has_credit_issues_as_string_is_not_a_boolean", p(json!({"has_credit_issues": "false"})),
                "has_credit_issues", "The has credit issues field must be true or false."),
            ("credit_issues_required_when_has_credit_issues", p(json!({"credit_issues": null})),
                "credit_issues", "The credit issues field is required when has credit issues is true."),
            ("credit_issues_empty_is_rejected", p(json!({"credit_issues": []})),
                "credit_issues", "The credit issues field must have at least 1 items."),
            ("credit_issues_must_be_an_array", p(json!({"credit_issues": "ccj"})),
                "credit_issues", "The credit issues field must be an array."),
            ("credit_issues_more_than_20_are_rejected", p(json!({"credit_issues": vec!["ccj"; 21]})),
                "credit_issues", "The credit issues field must not have more than 20 items."),
            ("credit_issue_outside_the_list_is_reported_at_its_index", p(json!({"credit_issues": ["ccj", "parking_fine"]})),
                "credit_issues.1", "The selected credit issues.1 is invalid."),
            ("credit_issue_of_wrong_type_is_reported_at_its_index", p(json!({"credit_issues": [7]})),
                "credit_issues.0", "The credit issues.0 field must be a string."),
            ("purchase_type_required_for_a_purchase", p(json!({"purchase_type": null})),
                "purchase_type", "The purchase type field is required when mortgage purpose is purchase."),
            ("purchase_type_outside_the_list_is_rejected", p(json!({"purchase_type": "buy_to_let"})),
                "purchase_type", "The selected purchase type is invalid."),
            ("mortgage_scheme_required_for_a_first_time_buyer", p(json!({"mortgage_scheme": null})),
                "mortgage_scheme", "The mortgage scheme field is required when purchase type is first_time_buyer."),
            ("mortgage_scheme_outside_the_list_is_rejected", p(json!({"mortgage_scheme": "help_to_buy"})),
                "mortgage_scheme", "The selected mortgage scheme is invalid."),
            ("new_property_value_required_for_a_purchase", p(json!({"new_property_value": null})),
                "new_property_value", "The new property value field is required when mortgage purpose is purchase."),
            ("new_property_value_as_boolean_is_not_a_number", p(json!({"new_property_value": true})),
                "new_property_value", "The new property value field must be a number."),
            ("deposit_amount_required_for_a_purchase", p(json!({"deposit_amount": null})),
                "deposit_amount", "The deposit amount field is required when mortgage purpose is purchase."),
            ("deposit_amount_negative_is_rejected", p(json!({"deposit_amount": -0.01})),
                "deposit_amount", "The deposit amount field must be at least 0."),
            ("remortgage_reason_required_for_a_remortgage", r(json!({"remortgage_reason": null})),
                "remortgage_reason", "The remortgage reason field is required when mortgage purpose is remortgage."),
            ("remortgage_reason_outside_the_list_is_rejected", r(json!({"remortgage_reason": "divorce"})),
                "remortgage_reason", "The selected remortgage reason is invalid."),
            ("current_property_value_required_for_a_remortgage", r(json!({"current_property_value": null})),
                "current_property_value", "The current property value field is required when mortgage purpose is remortgage."),
            ("outstanding_mortgage_amount_required_for_a_remortgage", r(json!({"outstanding_mortgage_amount": null})),
                "outstanding_mortgage_amount", "The outstanding mortgage amount field is required when mortgage purpose is remortgage."),
            ("additional_borrowing_amount_required_when_borrowing_more", r(json!({"additional_borrowing_amount": null})),
                "additional_borrowing_amount", "The additional borrowing amount field is required when remortgage reason is borrow_more_money."),
            ("additional_borrowing_amount_negative_is_rejected", r(json!({"additional_borrowing_amount": -5})),
                "additional_borrowing_amount", "The additional borrowing amount field must be at least 0."),
            ("release_borrowing_amount_required_when_releasing_money", r(json!({"remortgage_reason": "release_money"})),
                "release_borrowing_amount", "The release borrowing amount field is required when remortgage reason is release_money."),
            ("product_uuid_that_is_not_a_uuid_is_rejected", p(json!({"product_uuid": "not-a-uuid"})),
                "product_uuid", "The product uuid field must be a valid UUID."),
            ("product_uuid_without_hyphens_is_rejected", p(json!({"product_uuid": "67e5504410b1426f9247bb680e5fe0c8"})),
                "product_uuid", "The product uuid field must be a valid UUID."),
            ("product_uuid_as_number_is_not_a_string", p(json!({"product_uuid": 123})),
                "product_uuid", "The product uuid field must be a string."),
            ("credit_check_consent_as_string_is_not_a_boolean", p(json!({"credit_check_consent": "yes"})),
                "credit_check_consent", "The credit check consent field must be true or false."),
            ("addresses_empty_is_rejected", p(json!({"addresses": []})),
                "addresses", "The addresses field must have at least 1 items."),
            ("addresses_as_object_is_not_an_array", p(json!({"addresses": address()})),
                "addresses", "The addresses field must be an array."),
            ("addresses_more_than_20_are_rejected", p(json!({"addresses": vec![address(); 21]})),
                "addresses", "The addresses field must not have more than 20 items."),
            ("address_that_is_not_an_object_is_reported_at_its_index", p(json!({"addresses": [address(), "1 High Street"]})),
                "addresses.1", "The addresses.1 field must be an object."),
            ("address_line_1_is_required", a(json!({"line_1": " "})),
                "addresses.0.line_1", "The addresses.0.line 1 field is required."),
            ("address_postcode_is_required", a(json!({"postcode": null})),
                "addresses.0.postcode", "The addresses.0.postcode field is required."),
            ("address_postcode_longer_than_16_characters_is_rejected", a(json!({"postcode": "LS1 1AA LS1 1AA X"})),
                "addresses.0.postcode", "The addresses.0.postcode field must not be greater than 16 characters."),
            ("address_line_2_must_be_a_string", a(json!({"line_2": ["Flat 2"]})),
                "addresses.0.line_2", "The addresses.0.line 2 field must be a string."),
            ("address_town_city_longer_than_255_characters_is_rejected", a(json!({"town_city": "L".repeat(256)})),
                "addresses.0.town_city", "The addresses.0.town city field must not be greater than 255 characters."),
            ("address_date_moved_in_must_be_a_valid_date", a(json!({"date_moved_in": "01/01/2015"})),
                "addresses.0.date_moved_in", "The addresses.0.date moved in field must be a valid date in the format YYYY-MM-DD."),
            ("address_date_moved_out_before_date_moved_in_is_rejected", a(json!({"date_moved_out": "2014-12-31"})),
                "addresses.0.date_moved_out", "The addresses.0.date moved out field must be a date after or equal to addresses.0.date moved in."),
            ("address_problem_is_reported_at_its_own_index", p(json!({"addresses": [address(), {"line_1": "2 Low Road"}]})),
                "addresses.1.postcode", "The addresses.1.postcode field is required."),
        ]
    }

    #[test]
    fn each_rule_reports_exactly_its_own_error() {
        let cases = rule_cases();
        let names: std::collections::HashSet<_> = cases.iter().map(|case| case.0).collect();
        assert_eq!(names.len(), cases.len(), "case names must be unique");
        let failures: Vec<String> = cases
            .iter()
            .filter_map(|(name, body, path, message)| {
                let actual = error_map(body);
                (actual != errors(&[(path, message)])).then(|| format!("{name}: got {actual:?}"))
            })
            .collect();
        assert!(
            failures.is_empty(),
            "failing cases:\n{}",
            failures.join("\n")
        );
    }

    #[test]
    fn valid_purchase_enquiry_parses_into_typed_values() {
        assert_eq!(parse(&purchase_body()), Ok(purchase_enquiry()));
    }

    #[test]
    fn valid_remortgage_enquiry_parses_into_typed_values() {
        let expected = Enquiry {
            brand: Brand("brand_b".into()),
            first_name: "John".into(),
            last_name: "Smith".into(),
            email: Email("john@example.co.uk".into()),
            mobile_number: MobileNumber("07700900123".into()),
            date_of_birth: day("1980-12-31"),
            stage: Stage::Researching,
            application_type: ApplicationType::MultiApplicant,
            employment_status: EmploymentStatus::SelfEmployed,
            total_annual_income: 0.0,
            mortgage: Mortgage::Remortgage(Remortgage {
                remortgage_reason: RemortgageReason::BorrowMoreMoney,
                current_property_value: 400000.0,
                outstanding_mortgage_amount: 150000.75,
                additional_borrowing_amount: Some(30000.0),
                release_borrowing_amount: None,
            }),
            credit_issues: None,
            product_uuid: None,
            credit_check_consent: false,
            addresses: None,
        };
        let enquiry = parse(&remortgage_body());
        assert_eq!(enquiry, Ok(expected));
        assert_eq!(
            enquiry.map(|e| (e.has_credit_issues(), e.mortgage.purpose())),
            Ok((false, MortgagePurpose::Remortgage))
        );
    }

    #[test]
    fn a_body_that_is_not_an_object_reports_every_required_field() {
        let expected = errors(&[
            (
                "application_type",
                "The application type field is required.",
            ),
            ("brand", "The brand field is required."),
            ("date_of_birth", "The date of birth field is required."),
            ("email", "The email field is required."),
            (
                "employment_status",
                "The employment status field is required.",
            ),
            ("first_name", "The first name field is required."),
            (
                "has_credit_issues",
                "The has credit issues field is required.",
            ),
            ("last_name", "The last name field is required."),
            ("mobile_number", "The mobile number field is required."),
            (
                "mortgage_purpose",
                "The mortgage purpose field is required.",
            ),
            ("stage", "The stage field is required."),
            ("terms_agreement", "The terms agreement field is required."),
            (
                "total_annual_income",
                "The total annual income field is required.",
            ),
        ]);
        for body in [
            json!({}),
            json!([1, 2]),
            json!("enquiry"),
            json!(null),
            json!(7),
        ] {
            assert_eq!(error_map(&body), expected, "body {body}");
        }
    }

    #[test]
    fn several_errors_are_all_reported_at_once() {
        let body = with(
            purchase_body(),
            json!({
                "first_name": null,
                "email": "nope",
                "deposit_amount": -1,
                "credit_issues": ["ccj", "x", "iva", "y"],
                "addresses": [{"line_1": "1 High Street", "postcode": "LS1 1AA"}, {"date_moved_in": "2020-02-30"}]
            }),
        );
        assert_eq!(
            error_map(&body),
            errors(&[
                (
                    "addresses.1.date_moved_in",
                    "The addresses.1.date moved in field must be a valid date in the format YYYY-MM-DD."
                ),
                (
                    "addresses.1.line_1",
                    "The addresses.1.line 1 field is required."
                ),
                (
                    "addresses.1.postcode",
                    "The addresses.1.postcode field is required."
                ),
                (
                    "credit_issues.1",
                    "The selected credit issues.1 is invalid."
                ),
                (
                    "credit_issues.3",
                    "The selected credit issues.3 is invalid."
                ),
                (
                    "deposit_amount",
                    "The deposit amount field must be at least 0."
                ),
                ("email", "The email field must be a valid email address."),
                ("first_name", "The first name field is required."),
            ])
        );
    }

    #[test]
    fn wrong_types_are_reported_on_their_own_fields() {
        let body = with(
            purchase_body(),
            json!({
                "first_name": ["Jane"],
                "stage": 3,
                "terms_agreement": 1,
                "new_property_value": "250000",
                "credit_issues": {"0": "ccj"},
                "addresses": [{"line_1": 1, "postcode": false}]
            }),
        );
        assert_eq!(
            error_map(&body),
            errors(&[
                (
                    "addresses.0.line_1",
                    "The addresses.0.line 1 field must be a string."
                ),
                (
                    "addresses.0.postcode",
                    "The addresses.0.postcode field must be a string."
                ),
                ("credit_issues", "The credit issues field must be an array."),
                ("first_name", "The first name field must be a string."),
                (
                    "new_property_value",
                    "The new property value field must be a number."
                ),
                ("stage", "The stage field must be a string."),
                (
                    "terms_agreement",
                    "The terms agreement field must be true or false."
                ),
            ])
        );
    }

    #[test]
    fn conditional_fields_are_ignored_when_their_condition_does_not_hold() {
        let garbage = json!({
            "remortgage_reason": "get_better_rate",
            "additional_borrowing_amount": "lots",
            "release_borrowing_amount": -1,
            "purchase_type": "castle",
            "mortgage_scheme": 3,
            "new_property_value": -1,
            "deposit_amount": "none",
            "credit_issues": ["not_a_credit_issue"]
        });
        let enquiry = parse(&with(remortgage_body(), garbage));
        let expected = Mortgage::Remortgage(Remortgage {
            remortgage_reason: RemortgageReason::GetBetterRate,
            current_property_value: 400000.0,
            outstanding_mortgage_amount: 150000.75,
            additional_borrowing_amount: None,
            release_borrowing_amount: None,
        });
        assert_eq!(
            enquiry.map(|e| (e.mortgage, e.credit_issues)),
            Ok((expected, None))
        );

        let not_first_time = json!({"purchase_type": "home_mover", "mortgage_scheme": "bogus"});
        let enquiry = parse(&with(purchase_body(), not_first_time));
        let scheme = enquiry.map(|e| match e.mortgage {
            Mortgage::Purchase(purchase) => (purchase.purchase_type, purchase.mortgage_scheme),
            Mortgage::Remortgage(_) => (PurchaseType::AdditionalProperty, None),
        });
        assert_eq!(scheme, Ok((PurchaseType::HomeMover, None)));
    }

    #[test]
    fn dependent_fields_are_not_reported_when_their_condition_is_invalid() {
        let body = with(
            purchase_body(),
            json!({
                "mortgage_purpose": "buy_to_let",
                "purchase_type": null,
                "new_property_value": null,
                "has_credit_issues": "yes",
                "credit_issues": null
            }),
        );
        assert_eq!(
            error_map(&body),
            errors(&[
                (
                    "has_credit_issues",
                    "The has credit issues field must be true or false."
                ),
                (
                    "mortgage_purpose",
                    "The selected mortgage purpose is invalid."
                ),
            ])
        );
        let body = with(
            remortgage_body(),
            json!({"remortgage_reason": "x", "additional_borrowing_amount": null}),
        );
        assert_eq!(
            error_map(&body),
            errors(&[(
                "remortgage_reason",
                "The selected remortgage reason is invalid."
            )])
        );
    }

    #[test]
    fn optional_fields_may_be_omitted_or_null() {
        let body = with(
            purchase_body(),
            json!({"product_uuid": null, "credit_check_consent": null, "addresses": null}),
        );
        let enquiry = parse(&body).map(|e| (e.product_uuid, e.credit_check_consent, e.addresses));
        assert_eq!(enquiry, Ok((None, false, None)));
    }

    #[test]
    fn limits_are_inclusive() {
        let body = with(
            purchase_body(),
            json!({
                "first_name": "n".repeat(255),
                "date_of_birth": "2025-06-14",
                "mobile_number": "+123456789012345",
                "credit_issues": vec!["iva"; 20],
                "addresses": vec![with(address(), json!({"postcode": "p".repeat(16), "date_moved_out": "2015-01-01"})); 20],
                "email": format!("{}@example.com", "a".repeat(242))
            }),
        );
        assert_eq!(
            parse(&body).map(|e| e.addresses.map(|a| a.len())),
            Ok(Some(20))
        );
    }

    #[test]
    fn email_is_trimmed_and_lower_cased() {
        assert_eq!(
            Email::parse("  Jane.Doe@Example.COM\t").map(|e| e.to_string()),
            Ok("jane.doe@example.com".to_owned())
        );
        assert_eq!(Email::parse("jane@localhost"), Err(InvalidEmail));
        assert_eq!(
            parse(&purchase_body()).map(|e| e.email.as_str().to_owned()),
            Ok("jane.doe@example.com".to_owned())
        );
        // Deserializing goes through the same constructor, so stored data stays normalised.
        assert_eq!(
            serde_json::from_value::<Email>(json!("A@B.CO")).ok(),
            Some(Email("a@b.co".into()))
        );
        assert!(serde_json::from_value::<Email>(json!("not an email")).is_err());
    }

    #[test]
    fn mobile_number_is_reduced_to_plus_and_digits() {
        assert_eq!(
            MobileNumber::parse(" +44 (0) 7700-900 123 ").map(|m| m.as_str().to_owned()),
            Ok("+4407700900123".to_owned())
        );
        assert_eq!(
            MobileNumber::parse("++447700900123"),
            Err(InvalidMobileNumber)
        );
    }

    #[test]
    fn enquiry_serializes_in_the_wire_shape_and_round_trips() {
        let enquiry = purchase_enquiry();
        let wire = serde_json::to_value(&enquiry).unwrap_or_default();
        assert_eq!(wire["mortgage_purpose"], json!("purchase"));
        assert_eq!(wire["purchase_type"], json!("first_time_buyer"));
        assert_eq!(wire["mortgage_scheme"], json!("shared_ownership"));
        assert_eq!(
            wire["credit_issues"],
            json!(["ccj", "late_payments_non_mortgage"])
        );
        assert_eq!(wire["email"], json!("jane.doe@example.com"));
        assert_eq!(wire["date_of_birth"], json!("1990-05-17"));
        assert_eq!(serde_json::from_value::<Enquiry>(wire).ok(), Some(enquiry));
    }

    #[test]
    fn attach_request_parses_email_and_product() {
        let body = json!({"email": " John@Example.com ", "product_uuid": "67e55044-10b1-426f-9247-bb680e5fe0c8"});
        assert_eq!(
            parse_attach(&body),
            Ok(AttachRequest {
                email: Email("john@example.com".into()),
                product_uuid: Uuid::from_u128(0x67e55044_10b1_426f_9247_bb680e5fe0c8),
            })
        );
    }

    #[test]
    fn attach_request_reports_both_fields() {
        let map = |body: Value| parse_attach(&body).err().map(ValidationErrors::into_map);
        assert_eq!(
            map(json!([])),
            Some(errors(&[
                ("email", "The email field is required."),
                ("product_uuid", "The product uuid field is required."),
            ]))
        );
        assert_eq!(
            map(json!({"email": "john", "product_uuid": "{67e55044-10b1-426f-9247-bb680e5fe0c8}"})),
            Some(errors(&[
                ("email", "The email field must be a valid email address."),
                (
                    "product_uuid",
                    "The product uuid field must be a valid UUID."
                ),
            ]))
        );
    }
}

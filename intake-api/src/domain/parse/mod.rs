//! The enquiry, referral and attach request bodies, parsed from untyped JSON into domain values.
//!
//! Parsing reports every problem at once, each on its own field path, with Laravel's wording:
//! partners migrating from the original service already show those messages to their users.

mod fields;
#[cfg(test)]
mod tests;
mod webhook_endpoint;

pub use fields::MAX_ITEMS;
pub use webhook_endpoint::{
    DEFAULT_HISTORY_PAGE, EndpointRequest, HistoryFilter, HistoryParams, MAX_HISTORY_PAGE,
    MAX_URL_CHARS, parse_endpoint_change, parse_history_filter, parse_new_endpoint, parse_recover,
    parse_secret_rotation, parse_test_event,
};

use chrono::{Datelike, NaiveDate};
use serde_json::Value;

use super::contact::{Email, MAX_MOBILE_CHARS, MobileNumber};
use super::enquiry::{
    Address, AttachRequest, Brand, Enquiry, Purchase, Purpose, Referral, Remortgage,
};
use super::errors::ValidationErrors;
use fields::{
    Fields, amount, array, bounded_text, choice, date, email, finish, flag, hyphenated_uuid,
    invalid_choice, string, text, when, when_is, within,
};
use shared::intake::{CreditIssue, MortgagePurpose, PurchaseType, RemortgageReason};

/// Longest accepted postcode: room for any country's format, not for free text.
const MAX_POSTCODE: usize = 16;

/// Every field an enquiry reads, as partners name them (spec 2.2), those every enquiry must
/// send first: an error is reported under one of these, or under a path below
/// `credit_issues` or `addresses`.
pub const ENQUIRY_FIELDS: [&str; 26] = [
    "brand",
    "first_name",
    "last_name",
    "email",
    "mobile_number",
    "date_of_birth",
    "terms_agreement",
    "stage",
    "application_type",
    "employment_status",
    "total_annual_income",
    "mortgage_purpose",
    "has_credit_issues",
    "credit_issues",
    "purchase_type",
    "mortgage_scheme",
    "new_property_value",
    "deposit_amount",
    "remortgage_reason",
    "current_property_value",
    "outstanding_mortgage_amount",
    "additional_borrowing_amount",
    "release_borrowing_amount",
    "product_uuid",
    "credit_check_consent",
    "addresses",
];

/// Every field an address reads.
pub const ADDRESS_FIELDS: [&str; 9] = [
    "line_1",
    "line_2",
    "line_3",
    "town_city",
    "county",
    "country",
    "postcode",
    "date_moved_in",
    "date_moved_out",
];

/// Fields only a purchase reads; a remortgage ignores them.
pub const PURCHASE_FIELDS: [&str; 4] = [
    "purchase_type",
    "mortgage_scheme",
    "new_property_value",
    "deposit_amount",
];

/// Fields only a remortgage reads; a purchase ignores them.
pub const REMORTGAGE_FIELDS: [&str; 5] = [
    "remortgage_reason",
    "current_property_value",
    "outstanding_mortgage_amount",
    "additional_borrowing_amount",
    "release_borrowing_amount",
];

/// The earliest year of birth accepted: anything earlier is a typing mistake.
pub const OLDEST_BIRTH_YEAR: i32 = 1900;

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

    let (brand, first_name, last_name, email, mobile_number) = contact(f, brands);
    let date_of_birth = f.required("date_of_birth", |v, attr| {
        let born = date(v, attr)?;
        if born.year() < OLDEST_BIRTH_YEAR {
            return Err(format!(
                "The {attr} field must be a date after or equal to {OLDEST_BIRTH_YEAR}-01-01."
            ));
        }
        (born < today)
            .then_some(born)
            .ok_or_else(|| format!("The {attr} field must be a date before today."))
    });
    f.required("terms_agreement", accepted);
    let stage = f.required("stage", choice);
    let application_type = f.required("application_type", choice);
    let employment_status = f.required("employment_status", choice);
    let total_annual_income = f.required("total_annual_income", amount);
    let mortgage = match f.required("mortgage_purpose", choice) {
        Some(MortgagePurpose::Purchase) => purchase(f).map(Purpose::Purchase),
        Some(MortgagePurpose::Remortgage) => remortgage(f).map(Purpose::Remortgage),
        None => None,
    };
    let has_credit_issues = f.required("has_credit_issues", flag);
    // Checked whenever sent, as the document types it; at least one only when there are
    // credit issues, and kept only then.
    let min_issues = usize::from(has_credit_issues == Some(true));
    let sent_issues = f
        .optional("credit_issues", |v, attr| array(v, attr, min_issues))
        .map(|items| {
            f.each("credit_issues", items, |f, key, item| {
                f.check(key, item, choice::<CreditIssue>)
            })
        });
    let credit_issues = when(has_credit_issues, || {
        if f.sent("credit_issues") {
            return sent_issues.flatten();
        }
        let condition = ("has_credit_issues", "true");
        f.required_if("credit_issues", condition, |_, _| Ok(Vec::new()))
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

/// Longest partner reference kept with a referral.
pub const MAX_PARTNER_REFERENCE: usize = 64;

/// Longest note kept with a referral.
pub const MAX_REFERRAL_NOTE: usize = 2000;

/// Parses a referral body; `brands` are the configured brand identifiers.
pub fn parse_referral(body: &Value, brands: &[&str]) -> Result<Referral, ValidationErrors> {
    let mut errors = ValidationErrors::default();
    let mut fields = Fields::root(body, &mut errors);
    let f = &mut fields;
    let (brand, first_name, last_name, email, mobile_number) = contact(f, brands);
    f.required("contact_consent", accepted);
    let partner_reference = f.optional_text_within("partner_reference", MAX_PARTNER_REFERENCE);
    let note = f.optional_lines_within("note", MAX_REFERRAL_NOTE);
    let referral = (|| {
        Some(Referral {
            brand: brand?,
            first_name: first_name?,
            last_name: last_name?,
            email: email?,
            mobile_number: mobile_number?,
            partner_reference,
            note,
        })
    })();
    finish(referral, errors)
}

/// The fields every request about a customer starts with, each `None` when missing or
/// invalid (its error recorded).
type Contact = (
    Option<Brand>,
    Option<String>,
    Option<String>,
    Option<Email>,
    Option<MobileNumber>,
);

/// Reads [`Contact`]'s fields: the brand, the names, the e-mail address and the mobile number.
fn contact(f: &mut Fields<'_, '_>, brands: &[&str]) -> Contact {
    (
        f.required("brand", |v, attr| brand(v, attr, brands)),
        f.required("first_name", text),
        f.required("last_name", text),
        f.required("email", email),
        f.required("mobile_number", mobile),
    )
}

fn brand(value: &Value, attr: fields::Attr<'_>, brands: &[&str]) -> Result<Brand, String> {
    Brand::parse(string(value, attr)?, brands).ok_or_else(|| invalid_choice(attr, brands))
}

fn mobile(value: &Value, attr: fields::Attr<'_>) -> Result<MobileNumber, String> {
    within(value, attr, MAX_MOBILE_CHARS)?;
    MobileNumber::parse(string(value, attr)?).map_err(|_| {
        format!(
            "The {attr} field must be a valid phone number: an optional leading + and 7 to 15 digits."
        )
    })
}

/// A flag the partner must send as `true`: a consent or an agreement.
fn accepted(value: &Value, attr: fields::Attr<'_>) -> Result<(), String> {
    flag(value, attr)?
        .then_some(())
        .ok_or_else(|| format!("The {attr} field must be accepted."))
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

/// Longest redirect token considered: ours are 43 characters.
pub const MAX_REDIRECT_TOKEN: usize = 128;

/// Parses the portal's redeem body: the redirect link's token.
pub fn parse_redeem(body: &Value) -> Result<String, ValidationErrors> {
    let mut errors = ValidationErrors::default();
    let mut fields = Fields::root(body, &mut errors);
    let token = fields.required("token", |v, attr| bounded_text(v, attr, MAX_REDIRECT_TOKEN));
    finish(token, errors)
}

fn purchase(f: &mut Fields<'_, '_>) -> Option<Purchase> {
    let when = ("mortgage_purpose", "purchase");
    let purchase_type = f.required_if("purchase_type", when, choice);
    // Checked whenever sent; required, and kept, only for a first-time buyer.
    let sent_scheme = f.optional("mortgage_scheme", choice);
    let mortgage_scheme = when_is(purchase_type, PurchaseType::FirstTimeBuyer, || {
        if f.sent("mortgage_scheme") {
            return sent_scheme;
        }
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
    // Checked whenever sent; required, and kept, only for their own reason.
    let sent_additional = f.optional("additional_borrowing_amount", amount);
    let sent_release = f.optional("release_borrowing_amount", amount);
    let additional = when_is(reason, RemortgageReason::BorrowMoreMoney, || {
        let when = ("remortgage_reason", "borrow_more_money");
        if f.sent("additional_borrowing_amount") {
            return sent_additional;
        }
        f.required_if("additional_borrowing_amount", when, amount)
    });
    let release = when_is(reason, RemortgageReason::ReleaseMoney, || {
        if f.sent("release_borrowing_amount") {
            return sent_release;
        }
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
        ["line_2", "line_3", "town_city", "county", "country"].map(|key| f.optional_text(key));
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

//! The OpenAPI examples of the intake API's bodies: what the documents show partners.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{
    CaseResponse, CaseState, CaseStatusBody, LinkContinuation, RedeemRequest, RedeemedLink,
    RedirectResponse, ReferralRequest, ReferralResponse, ValidationErrorBody,
};

impl poem_openapi::types::Example for CaseResponse {
    fn example() -> Self {
        Self {
            message: "Case created".into(),
            reference: "418290357116".into(),
        }
    }
}

impl poem_openapi::types::Example for RedirectResponse {
    fn example() -> Self {
        Self {
            redirect: "https://portal.brand-a.example/continue?token=q0Vn3qN0m2wq6mCV6a5o0Ze4Jm0P1u4F6Yt1lW9fQkM".into(),
        }
    }
}

impl poem_openapi::types::Example for ReferralRequest {
    fn example() -> Self {
        Self {
            brand: "brand_a".into(),
            first_name: "Jane".into(),
            last_name: "Doe".into(),
            email: "jane.doe@example.com".into(),
            mobile_number: "+44 7700 900123".into(),
            contact_consent: true,
            partner_reference: Some("CRM-20931".into()),
            note: Some("Prefers a call after 6pm.".into()),
        }
    }
}

impl poem_openapi::types::Example for ReferralResponse {
    fn example() -> Self {
        Self {
            message: "Referral created".into(),
            reference: "418290357116".into(),
            redirect: "https://portal.brand-a.example/continue?token=q0Vn3qN0m2wq6mCV6a5o0Ze4Jm0P1u4F6Yt1lW9fQkM".into(),
        }
    }
}

/// The example case's creation time.
fn example_time() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-26T09:30:00Z")
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

/// The examples' product.
const EXAMPLE_PRODUCT: Uuid = Uuid::from_u128(0x3f1c2a9e_5b7d_4e21_9c3a_8d4f6b2e1a07);

impl poem_openapi::types::Example for CaseStatusBody {
    fn example() -> Self {
        let created = example_time();
        let activates = created + chrono::Duration::minutes(15);
        Self {
            reference: "418290357116".into(),
            brand: "brand_a".into(),
            status: CaseState::Active,
            created_at: created,
            updated_at: created + chrono::Duration::minutes(2),
            activates_at: Some(activates),
            activated_at: Some(activates + chrono::Duration::seconds(1)),
            product_uuid: Some(EXAMPLE_PRODUCT),
        }
    }
}

impl poem_openapi::types::Example for RedeemRequest {
    fn example() -> Self {
        Self {
            token: "q0Vn3qN0m2wq6mCV6a5o0Ze4Jm0P1u4F6Yt1lW9fQkM".into(),
        }
    }
}

impl poem_openapi::types::Example for RedeemedLink {
    fn example() -> Self {
        Self {
            reference: "418290357116".into(),
            brand: "brand_a".into(),
            continue_with: LinkContinuation::Product,
            product_uuid: Some(EXAMPLE_PRODUCT),
            email: "jane.doe@example.com".into(),
            sandbox: false,
        }
    }
}

impl poem_openapi::types::Example for ValidationErrorBody {
    fn example() -> Self {
        let errors = [
            ("email", "The email field must be a valid email address."),
            (
                "credit_issues.0",
                "The selected credit_issues.0 is invalid; allowed values: low_credit_score, ccj, default, iva, late_payments_non_mortgage, late_payments_mortgage, debt_management_plan, repossession, bankruptcy.",
            ),
            (
                "addresses.1.postcode",
                "The addresses.1.postcode field is required.",
            ),
        ];
        Self {
            message: Self::MESSAGE.into(),
            errors: errors
                .into_iter()
                .map(|(field, problem)| (field.to_owned(), vec![problem.to_owned()]))
                .collect(),
        }
    }
}

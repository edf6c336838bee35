//! A partner's Rust client of the Partner Intake API.
//!
//! It gets access tokens with the partner's client credentials, caches each one and renews
//! it 30 seconds before it expires (spec 5.4), with a single token request in flight however
//! many tasks call at once, and retries a call once with a fresh token when the API answers
//! 401. [`Client::submit`], [`Client::attach`], [`Client::refer`] and [`Client::case`] take and
//! return the types of `openapi/intake-api.yaml`, as do the webhook endpoint operations
//! ([`Client::create_webhook_endpoint`]...); every documented error is an [`Error`] variant.
//! [`WebhookVerifier`] checks a webhook delivery's signature.
//!
//! ```no_run
//! # async fn run(enquiry: partner_client::Enquiry) -> Result<(), Box<dyn std::error::Error>> {
//! use partner_client::{AttachRequest, Client, Credentials, IdempotencyKey};
//!
//! let client = Client::builder(
//!     Credentials::new("CLIENT_ID", "CLIENT_SECRET"),
//!     "https://auth.example/oauth/token",
//!     "https://intake.example",
//! )
//! .build()?;
//! let case = client.submit(&enquiry, Some(&IdempotencyKey::random())).await?;
//! println!("case {}", case.body.reference);
//! let attach = AttachRequest { email: enquiry.email.clone(), product_uuid: uuid::Uuid::nil() };
//! let link = client.attach(&attach, Some(&IdempotencyKey::random())).await?;
//! println!("send the customer to {}", link.body.redirect);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod client;
mod error;
mod webhooks;
pub mod wire;

/// Re-exported: [`Enquiry`] and [`AttachRequest`] use its types.
pub use chrono;
pub use client::{
    Answer, Client, ClientBuilder, INTAKE_SCOPE, IdempotencyKey, InvalidIdempotencyKey,
    REFERRAL_SCOPE,
};
pub use error::Error;
/// Tokens, credentials and DPoP keys: the partner client's token handling, shared with the
/// services.
pub use token_client::{
    AccessToken, AssertionAlgorithm, AssertionKey, AuthMethod, BuildError, ClientAuthentication,
    ClientSecret, Credentials, DEFAULT_RENEW_BEFORE, DpopKey, TokenError, TokenSource,
};
/// Re-exported: [`Enquiry`] and [`AttachRequest`] use its types.
pub use uuid;
pub use webhooks::{
    DEFAULT_TOLERANCE, DeliveryFilter, SignatureError, VerifyError, WEBHOOKS_SCOPE, WebhookVerifier,
};
pub use wire::{
    Address, ApplicationType, AttachRequest, CaseResponse, CaseState, CaseStatusBody, CreditIssue,
    EmploymentStatus, EndpointStatus, Enquiry, EventType, EventTypeList, MessageBody,
    MortgageScheme, NewWebhookEndpoint, OAuthErrorBody, Purchase, PurchaseType, Purpose,
    RedirectResponse, ReferralRequest, ReferralResponse, Remortgage, RemortgageReason, Stage,
    ValidationErrorBody, WebhookEndpoint, WebhookEndpointChange, WebhookEndpointWithSecret,
    WebhookEvent, WebhookEventData,
};
pub use wire::{
    DeliveryStatus, RecoverResult, WebhookAttempt, WebhookDelivery, WebhookDeliveryDetail,
    WebhookDeliveryList, WebhookTestResult,
};

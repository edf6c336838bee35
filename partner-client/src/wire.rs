//! The bodies of `openapi/intake-api.yaml` and `openapi/auth-server.yaml`, as Rust types: what
//! goes over the wire is exactly what serde makes of these.

pub use shared::error::OAuthErrorBody;
pub use shared::intake::webhook_deliveries::{
    DeliveryStatus, RecoverResult, WebhookAttempt, WebhookDelivery, WebhookDeliveryDetail,
    WebhookDeliveryList,
};
pub use shared::intake::webhook_endpoints::{
    EndpointStatus, NewWebhookEndpoint, SecretRotation, WebhookEndpoint, WebhookEndpointChange,
    WebhookEndpointList, WebhookEndpointWithSecret, WebhookTestRequest, WebhookTestResult,
};
pub use shared::intake::webhooks::{EventType, EventTypeList, WebhookEvent, WebhookEventData};
pub use shared::intake::{
    Address, AttachRequest, CaseResponse, CaseState, CaseStatusBody, Enquiry, MessageBody,
    Purchase, Purpose, RedirectResponse, ReferralRequest, ReferralResponse, Remortgage,
    ValidationErrorBody,
};
pub use shared::intake::{
    ApplicationType, CreditIssue, EmploymentStatus, MortgageScheme, PurchaseType, RemortgageReason,
    Stage,
};

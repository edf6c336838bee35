//! The intake-api's HTTP interface, built on the shared state: the operations (their wire
//! types are `shared::intake`'s), who may call them and how often.

pub mod body;
pub mod contract;
pub mod idempotency;
pub mod intake;
pub mod partner;
pub mod portal;
pub mod rate_limit;
pub mod referral;
pub mod webhooks;

use std::sync::Arc;

use poem::{Endpoint, EndpointExt};
use poem_openapi::OpenApiService;
use service_kit::openapi::{ApiDocuments, Deprecation, DeprecationHeaders};

use crate::state::AppState;

/// The closing log line's field holding the case a request was about.
pub const REFERENCE: &str = "reference";

/// The closing log line's field holding that case's brand.
pub const BRAND: &str = "brand";
use intake::IntakeApi;
use partner::Authenticate;
use portal::PortalApi;
use rate_limit::PartnerRateLimit;
use referral::ReferralApi;
use webhooks::WebhooksApi;

/// The OpenAPI service of the intake-api.
pub fn api_service(
    state: Arc<AppState>,
) -> OpenApiService<(IntakeApi, ReferralApi, PortalApi, WebhooksApi), ()> {
    OpenApiService::new(
        (
            IntakeApi {
                state: state.clone(),
            },
            ReferralApi {
                state: state.clone(),
            },
            PortalApi {
                state: state.clone(),
            },
            WebhooksApi { state },
        ),
        "Partner Intake API",
        env!("CARGO_PKG_VERSION"),
    )
    .description("Partners submit customer mortgage enquiries as cases and attach eligibility-engine products. Partners' calls need a bearer token with the `enquiry:case:intake:create` scope from the auth-server's token endpoint (a referral, `enquiry:referral:create`); the redeem call, made by brands' customer portals, needs `portal:redirect:redeem`; the webhook calls, `webhooks:manage`. Changes are compatible (new operations, optional fields, answer fields, enum values and event types, which clients must tolerate) unless announced: a breaking change comes as a new path version beside the old one, which answers with `Deprecation` and `Sunset` headers for an announced period (README, Versioning and change policy; CHANGELOG.md).")
}

/// The operations on their way out, each answering with its `Deprecation`, `Sunset` and
/// successor `Link` until its sunset (README, "Versioning and change policy"). A breaking
/// change adds the old operation here when its new version ships beside it.
pub const DEPRECATED: &[Deprecation] = &[];

/// The OpenAPI document and docs page, pointing partners at this deployment's token endpoint.
pub fn documents(state: &Arc<AppState>) -> ApiDocuments {
    let token_url = format!("{}/oauth/token", state.config.issuer());
    let brands = state.brand_ids();
    let (profile, nonces) = (state.config.profile(), state.dpop_nonces.is_some());
    service_kit::openapi::documents(&api_service(state.clone()), |doc| {
        contract::refine(doc, &brands, &token_url);
        contract::refine_profile(doc, profile, nonces);
        service_kit::openapi::mark_deprecated(doc, DEPRECATED);
    })
}

/// The operations, with authentication and the partners' rate limits in front of them.
pub fn api(state: &Arc<AppState>) -> impl Endpoint + 'static {
    let deprecated =
        DeprecationHeaders::new(DEPRECATED).expect("DEPRECATED's methods and times read");
    api_service(state.clone())
        .with(deprecated)
        .with(PartnerRateLimit::new(state.clone()))
        .with(Authenticate::new(state.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A method or time that does not read would stop every replica at start-up.
    #[test]
    fn every_deprecation_reads() {
        assert!(DeprecationHeaders::new(DEPRECATED).is_ok());
        for d in DEPRECATED {
            assert!(d.path.starts_with("/partners/"), "{d:?}");
        }
    }
}

//! `POST /portal/redirect-tokens/redeem`: the other end of the link attach hands out.

use std::sync::Arc;

use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, OpenApi, Tags};
use service_kit::telemetry::{OUTCOME, REASON, record};
use shared::intake::messages::LinkGone;
use shared::intake::{LinkContinuation, RedeemRequest, RedeemedLink};

use super::body::LenientJson;
use super::partner::Portal;
use super::{BRAND, REFERENCE};
use crate::domain::parse_redeem;
use crate::domain::redirect::hash_token;
use crate::error::IntakeError;
use crate::state::AppState;
use crate::store::Redemption;

#[derive(Tags)]
enum ApiTags {
    /// Calls a brand's customer portal makes.
    Portal,
}

/// Answers of the redeem call.
#[derive(ApiResponse)]
pub enum RedeemResponse {
    /// The link was good; it is now used.
    #[oai(status = 200)]
    Redeemed(Json<RedeemedLink>),
    /// The link was used already, has expired, was replaced by a newer link, its
    /// customer's data was erased, it never existed, or is of a brand the portal is not
    /// bound to:
    /// `{"message":"Link expired or already used"}`. Send the customer to the customer
    /// dashboard instead.
    #[oai(status = 410)]
    Gone(Json<LinkGone>),
}

/// The 410 every link the portal may not redeem gets, counted by why.
fn gone(outcome: &'static str) -> RedeemResponse {
    metrics::counter!("intake_redirects_redeemed_total", "outcome" => outcome).increment(1);
    record(OUTCOME, "link_gone");
    record(REASON, outcome);
    RedeemResponse::Gone(Json(LinkGone::default()))
}

/// The customer portal's operations.
pub struct PortalApi {
    /// Shared state.
    pub state: Arc<AppState>,
}

impl PortalApi {
    /// Counts and logs a token naming a brand this service is not configured with: the
    /// auth-server does not know `INTAKE_BRANDS`, so a misspelt `--brands` shows here.
    fn warn_of_unknown_brands(&self, portal: &Portal) {
        for brand in portal.brands() {
            if !self.state.brands.iter().any(|b| &b.id == brand) {
                metrics::counter!("intake_portal_unknown_brand_total").increment(1);
                tracing::warn!(
                    client_id = %portal.client_id(),
                    brand = %brand,
                    "portal client bound to a brand INTAKE_BRANDS does not name: it redeems none of that brand's links"
                );
            }
        }
    }
}

#[OpenApi]
impl PortalApi {
    /// Redeem a customer's redirect link.
    ///
    /// The brand's customer portal calls this with the `token` parameter of the link the
    /// customer arrived on. A link works once, until it expires, and only while it is the
    /// newest of its kind: attach's, the newest link attach made for its case; a
    /// referral's, the newest its partner's referrals made for the customer. `sandbox:
    /// true` says the case was made by a sandbox client, for practice: treat it as no real
    /// customer's (a test page, no e-mail or call, nothing in real records). Needs a token with the `portal:redirect:redeem` scope
    /// whose client is bound to the link's brand (`auth-server client create --brands`): a
    /// link of another brand is answered as one that never existed, and stays usable by its
    /// own brand's portal. A client bound to no brand gets 403.
    #[oai(
        path = "/portal/redirect-tokens/redeem",
        method = "post",
        operation_id = "redeemRedirectToken",
        tag = "ApiTags::Portal"
    )]
    async fn redeem(
        &self,
        #[oai(scope = "Portal::SCOPE")] portal: Portal,
        body: LenientJson<RedeemRequest>,
    ) -> Result<RedeemResponse, IntakeError> {
        let token = parse_redeem(&body.value)?;
        self.warn_of_unknown_brands(&portal);
        let redeemed = self
            .state
            .cases
            .redeem(&hash_token(&token), portal.client_id(), portal.brands())
            .await?;
        let redeemed = match redeemed {
            Redemption::Redeemed(redeemed) => redeemed,
            Redemption::Gone => return Ok(gone("gone")),
            // Told exactly what an unknown link gets; only the operator's metrics tell.
            Redemption::OtherBrand => return Ok(gone("other_brand")),
        };
        metrics::counter!("intake_redirects_redeemed_total", "outcome" => "redeemed").increment(1);
        record(OUTCOME, "link_redeemed");
        record(REFERENCE, &redeemed.reference);
        record(BRAND, &redeemed.brand);
        Ok(RedeemResponse::Redeemed(Json(RedeemedLink {
            reference: redeemed.reference,
            brand: redeemed.brand,
            continue_with: match redeemed.product_uuid {
                Some(_) => LinkContinuation::Product,
                None => LinkContinuation::Enquiry,
            },
            product_uuid: redeemed.product_uuid,
            email: redeemed.email,
            sandbox: redeemed.world.is_sandbox(),
        })))
    }
}

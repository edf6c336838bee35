//! `POST /portal/redirect-tokens/redeem`: the other end of the link attach hands out.

use std::sync::Arc;

use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, OpenApi, Tags};
use service_kit::telemetry::{Field, record};

use super::body::LenientJson;
use super::partner::Portal;
use super::wire::{LinkGone, RedeemRequestBody, RedeemedLink};
use crate::domain::parse_redeem;
use crate::domain::redirect::hash_token;
use crate::error::IntakeError;
use crate::state::AppState;

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
    /// The link was used already, has expired, was replaced by a newer link for the same
    /// case, or never existed: `{"message":"Link expired or already used"}`. Send the
    /// customer to the customer dashboard instead.
    #[oai(status = 410)]
    Gone(Json<LinkGone>),
}

/// The customer portal's operations.
pub struct PortalApi {
    /// Shared state.
    pub state: Arc<AppState>,
}

#[OpenApi]
impl PortalApi {
    /// Redeem a customer's redirect link.
    ///
    /// The brand's customer portal calls this with the `token` parameter of the link the
    /// customer arrived on. A link works once, until it expires, and only while it is the
    /// newest link made for its case. Needs a token with the `portal:redirect:redeem` scope.
    #[oai(
        path = "/portal/redirect-tokens/redeem",
        method = "post",
        operation_id = "redeemRedirectToken",
        tag = "ApiTags::Portal"
    )]
    async fn redeem(
        &self,
        portal: Portal,
        body: LenientJson<RedeemRequestBody>,
    ) -> Result<RedeemResponse, IntakeError> {
        let token = parse_redeem(&body.value)?;
        let redeemed = self
            .state
            .cases
            .redeem(&hash_token(&token), portal.client_id())
            .await?;
        let Some(redeemed) = redeemed else {
            metrics::counter!("intake_redirects_redeemed_total", "outcome" => "gone").increment(1);
            record(Field::Outcome, "link_gone");
            return Ok(RedeemResponse::Gone(Json(LinkGone::default())));
        };
        metrics::counter!("intake_redirects_redeemed_total", "outcome" => "redeemed").increment(1);
        record(Field::Outcome, "link_redeemed");
        record(Field::Reference, &redeemed.reference);
        record(Field::Brand, &redeemed.brand);
        Ok(RedeemResponse::Redeemed(Json(RedeemedLink {
            reference: redeemed.reference,
            brand: redeemed.brand,
            product_uuid: redeemed.product_uuid,
            email: redeemed.email,
        })))
    }
}

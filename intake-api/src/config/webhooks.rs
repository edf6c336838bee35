//! The settings of partners' webhooks, read once, into the durations and limits the worker,
//! the routes and the housekeeping use.

use std::time::Duration;

use clap::Args;
use service_kit::command_line::{millis, seconds, within};
use service_kit::outbound::Reach;

/// `INTAKE_WEBHOOK_ALLOW_INSECURE`: the server and `webhook set` read it alike.
#[derive(Debug, Clone, Copy, Args)]
pub struct AllowInsecure {
    /// Lets webhook endpoints be http URLs, or names or addresses that are not public
    /// (private, loopback, link-local...): for local use and tests only.
    #[arg(
        id = "webhook_allow_insecure",
        long = "webhook-allow-insecure",
        env = "INTAKE_WEBHOOK_ALLOW_INSECURE",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub allow: bool,
}

impl AllowInsecure {
    /// Where a partner's endpoint may point, as the API and the CLI check it.
    pub fn reach(self) -> Reach {
        Reach {
            allow_insecure: self.allow,
            switch: "INTAKE_WEBHOOK_ALLOW_INSECURE",
        }
    }
}

/// How partners' webhooks are sent, retried, and kept.
#[derive(Debug, Clone, Args)]
pub struct WebhookSettings {
    #[command(flatten)]
    pub insecure: AllowInsecure,
    /// Days partners' delivery history keeps an event once it is delivered or given up on,
    /// with its tries; older ones are deleted in the background.
    #[arg(
        id = "webhook_history_days",
        long = "webhook-history-days",
        env = "INTAKE_WEBHOOK_HISTORY_DAYS",
        default_value_t = 30,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub history_days: u32,
    /// How long an event is retried before it is marked failed, in seconds.
    #[arg(
        id = "webhook_retry_secs",
        long = "webhook-retry-secs",
        env = "INTAKE_WEBHOOK_RETRY_SECS",
        value_name = "SECONDS",
        default_value = "86400",
        value_parser = seconds
    )]
    pub retry: Duration,
    /// The first wait before an event is tried again, in milliseconds; it doubles with each
    /// try, up to an hour.
    #[arg(
        id = "webhook_backoff_ms",
        long = "webhook-backoff-ms",
        env = "INTAKE_WEBHOOK_BACKOFF_MS",
        value_name = "MILLISECONDS",
        default_value = "5000",
        value_parser = millis
    )]
    pub backoff: Duration,
    /// How often the webhook worker looks for due events, in milliseconds (10 at least).
    #[arg(
        id = "webhook_poll_ms",
        long = "webhook-poll-ms",
        env = "INTAKE_WEBHOOK_POLL_MS",
        value_name = "MILLISECONDS",
        default_value = "1000",
        value_parser = poll
    )]
    pub poll: Duration,
    /// How long a replica holds the events it claimed for sending, in seconds: another
    /// replica sends them once this has passed without an outcome recorded (the first one
    /// stopped). Longer than a send may take (10 s), so a slow send is not made twice.
    #[arg(
        id = "webhook_lease_secs",
        long = "webhook-lease-secs",
        env = "INTAKE_WEBHOOK_LEASE_SECS",
        value_name = "SECONDS",
        default_value = "60",
        value_parser = lease
    )]
    pub lease: Duration,
    /// Webhook endpoints a partner may have. Set 1 while servers of 0.2.0 run beside this
    /// release (a rolling upgrade, or one you may roll back): they send a partner's events
    /// to one endpoint.
    #[arg(
        id = "webhook_endpoints_per_partner",
        long = "webhook-endpoints-per-partner",
        env = "INTAKE_WEBHOOK_ENDPOINTS_PER_PARTNER",
        default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(1..=100)
    )]
    pub endpoints_per_partner: u64,
    /// How long an endpoint may fail every delivery before it is disabled, in seconds (5
    /// days); the partner sees why and enables it again.
    #[arg(
        id = "webhook_disable_after_secs",
        long = "webhook-disable-after-secs",
        env = "INTAKE_WEBHOOK_DISABLE_AFTER_SECS",
        value_name = "SECONDS",
        default_value = "432000",
        value_parser = disable_after
    )]
    pub disable_after: Duration,
}

/// The shortest poll period: a smaller one would have the worker spin.
const SHORTEST_POLL: Duration = Duration::from_millis(10);

fn poll(value: &str) -> Result<Duration, String> {
    within(millis(value)?, SHORTEST_POLL..)
}

/// A lease must outlast a send ([`super::WEBHOOK_SEND_TIMEOUT`]), or a slow send is made
/// twice.
fn lease(value: &str) -> Result<Duration, String> {
    within(
        seconds(value)?,
        super::WEBHOOK_SEND_TIMEOUT + Duration::from_secs(1)..,
    )
}

fn disable_after(value: &str) -> Result<Duration, String> {
    within(seconds(value)?, Duration::from_secs(1)..)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<WebhookSettings, clap::Error> {
        crate::config::read_group(args)
    }

    #[test]
    fn each_setting_is_read_into_its_unit_once() {
        let read = parse(&[
            "--webhook-retry-secs",
            "90",
            "--webhook-backoff-ms",
            "250",
            "--webhook-poll-ms",
            "10",
            "--webhook-lease-secs",
            "11",
        ])
        .expect("good settings");
        assert_eq!(read.retry, Duration::from_secs(90));
        assert_eq!(read.backoff, Duration::from_millis(250));
        assert_eq!(read.poll, Duration::from_millis(10));
        assert_eq!(read.lease, Duration::from_secs(11));
        assert_eq!(read.disable_after, Duration::from_secs(5 * 86_400));
        assert!(!read.insecure.allow);
    }

    #[test]
    fn what_the_worker_cannot_run_with_is_refused_with_its_name() {
        for (flag, value) in [
            ("--webhook-poll-ms", "9"),
            ("--webhook-lease-secs", "10"),
            ("--webhook-disable-after-secs", "0"),
            ("--webhook-retry-secs", "1.5"),
            ("--webhook-backoff-ms", "soon"),
        ] {
            let refused = parse(&[flag, value]).expect_err(flag).to_string();
            assert!(refused.contains(flag), "{flag}: {refused}");
        }
    }
}

//! The operator command tree (`client`, `key`, `audit`): each command's flags, help and
//! examples; [`crate::cli`] runs them.

use clap::Subcommand;
use service_kit::command_line::output::OutputArg;
use service_kit::command_line::{Actor, Database, args_of, reads};
use shared::claims::TokenAlgorithm;

use crate::audit::Head;
use crate::config::{
    AllowInsecureArg, AuthServerNames, Config, Fapi2Arg, KekArgs, KeyStoreArgs,
    ROTATION_INTERVAL_VARIABLE,
};
use crate::store::clients::AuthMethod;

/// What a command that checks the audit trail takes besides its own arguments.
fn keyed_reads() -> Vec<clap::Arg> {
    [
        args_of::<Database<AuthServerNames>>(),
        args_of::<KekArgs>(),
        args_of::<OutputArg>(),
    ]
    .concat()
}

/// What a command that changes clients, keys or the audit trail takes besides its own
/// arguments.
fn changes() -> Vec<clap::Arg> {
    [
        args_of::<Database<AuthServerNames>>(),
        args_of::<KekArgs>(),
        args_of::<Actor<AuthServerNames>>(),
        args_of::<OutputArg>(),
    ]
    .concat()
}

/// What a command that makes or destroys signing keys takes besides its own arguments.
fn signing_key_changes() -> Vec<clap::Arg> {
    [changes(), args_of::<KeyStoreArgs>()].concat()
}

/// What a command that registers a client's keys takes besides its own arguments.
fn key_changes() -> Vec<clap::Arg> {
    [
        changes(),
        args_of::<AllowInsecureArg>(),
        args_of::<Fapi2Arg>(),
    ]
    .concat()
}

/// What `client ensure` takes besides its own arguments: it registers keys from a file
/// only, so has no JWKS URL to allow.
fn declarations() -> Vec<clap::Arg> {
    [changes(), args_of::<Fapi2Arg>()].concat()
}

/// A parsed command line: the server, the migrations or an operator command.
pub type Cli = service_kit::command_line::Cli<AuthServerNames, Config, OperatorCommand>;

/// The operator commands.
#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// Manage partner clients.
    #[command(
        subcommand,
        after_help = "Examples:
  auth-server client list
  auth-server client show CLIENT_ID"
    )]
    Client(ClientCommand),
    /// Manage token-signing keys.
    #[command(
        subcommand,
        after_help = "Examples:
  auth-server key list
  auth-server key rotate"
    )]
    Key(KeyCommand),
    /// Read and check the audit trail of changes to clients and keys.
    #[command(
        subcommand,
        after_help = "Examples:
  auth-server audit list --since 7d
  auth-server audit verify --head 42:KEPT_MAC"
    )]
    Audit(AuditCommand),
    /// Bring the clients a file keeps to what it declares: make those it lists and the
    /// database has not, change what differs, and (with --prune) disable, never delete, the
    /// file's clients it no longer lists; one audit entry per change. A client made by hand
    /// (`client create`, `client ensure`) is never changed nor pruned: naming one is
    /// refused unless --adopt takes it over. What an entry leaves out stays as it is: a
    /// client disabled outside the file stays disabled unless its entry says `disabled:
    /// false`. Exits 0 when nothing changed or all was applied, 2 for a file that cannot be
    /// applied as written (every problem with its line) or a made secret that would go to a
    /// pipe, 3 when it asks what a change must not do (a sandbox client made real, another
    /// way of authenticating, a client made by hand without --adopt); nothing is written
    /// then.
    #[command(
        args = key_changes(),
        after_help = "Examples:
  auth-server apply -f clients.yaml --dry-run       # the difference, as a table; changes nothing
  auth-server apply -f clients.yaml --actor 'PR 214'
  auth-server apply -f clients.yaml --adopt --dry-run   # what taking over the clients made by hand it names changes
  git show main:clients.yaml | auth-server apply -f - --prune -o json --show-secret"
    )]
    Apply {
        /// The clients file (YAML, at most 1 MiB); `-` reads standard input. Relative paths
        /// in it are read from its directory.
        #[arg(short = 'f', long = "file", value_name = "FILE")]
        file: std::path::PathBuf,
        /// Print the difference and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Disable the enabled clients the file made (or adopted) and no longer lists;
        /// never a client made by hand.
        #[arg(long)]
        prune: bool,
        /// Take over the clients made by hand (`client create`, `client ensure`) that the
        /// file names: from now on the file's to change and prune.
        #[arg(long)]
        adopt: bool,
        /// Print the secrets made for new clients also when stdout is not a terminal (a pipe
        /// or a file, which can end up in a CI log); without it such an apply changes
        /// nothing.
        #[arg(long)]
        show_secret: bool,
    },
}

/// `auth-server audit ...`
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Print the entries, oldest first.
    #[command(
        args = reads::<AuthServerNames>(),
        after_help = "Examples:
  auth-server audit list --since 24h
  auth-server audit list --since 2026-11-26T00:00:00Z -o json"
    )]
    List {
        /// Only entries made at or after this time: RFC 3339 (2026-11-26T00:00:00Z), or a
        /// span back from now (30m, 24h, 7d).
        #[arg(long, value_parser = service_kit::command_line::operator::parse_since)]
        since: Option<chrono::DateTime<chrono::Utc>>,
    },
    /// Check every entry's seal (needs the servers' key): exits 1 naming the first entry
    /// altered, removed or reordered, or without its seal.
    #[command(
        args = keyed_reads(),
        after_help = "Examples:
  auth-server audit verify                        # prints the count and the head; keep the head elsewhere
  auth-server audit verify --head 42:q83vEjRW...  # and fails unless the trail still holds that head"
    )]
    Verify {
        /// A head printed before (`SEQ:MAC`), or logged by a server: fails when the trail no
        /// longer holds it, which is how entries removed from the end show.
        #[arg(long)]
        head: Option<Head>,
    },
    /// Once, upgrading a database from before entries were sealed: accept the entries its
    /// migrations wrote without the key, as they stand now, with a sealed marker (check
    /// them with `audit list` first). Refuses any other entry without a seal.
    #[command(
        args = changes(),
        after_help = "Examples:
  auth-server audit list --since 24h && auth-server audit seal --actor alice"
    )]
    Seal,
}

/// `auth-server client ...`
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Register a client; prints its id and secret (shown only this once), or, with
    /// private_key_jwt, the keys it signs its assertions with (it has no secret).
    #[command(
        args = key_changes(),
        after_help = "Examples:
  auth-server client create --name \"Acme Mortgages\" --scopes enquiry:case:intake:create
  auth-server client create --name Acme --scopes \"enquiry:case:intake:create enquiry:referral:create\" -o json
  auth-server client create --name \"Brand A portal\" --scopes portal:redirect:redeem --brands brand_a
  auth-server client create --name Acme --scopes enquiry:case:intake:create --auth-method private_key_jwt --jwks-file acme-keys.json
  auth-server client create --name Acme --scopes enquiry:case:intake:create --auth-method private_key_jwt --jwks-uri https://acme.example/jwks.json
  auth-server client create --name \"Acme sandbox\" --scopes enquiry:case:intake:create --sandbox"
    )]
    Create {
        /// Partner name, for operators: unique, whatever its case.
        #[arg(long)]
        name: String,
        /// Space-separated scopes the client may be granted.
        #[arg(long)]
        scopes: String,
        /// With portal:redirect:redeem, and only then: the brands whose links the portal
        /// redeems, comma-separated, as the intake-api's INTAKE_BRANDS names them.
        #[arg(long)]
        brands: Option<String>,
        /// How the client authenticates: a secret the server generates, or assertions
        /// signed with its own private key (RFC 7523), whose public keys --jwks-file or
        /// --jwks-uri gives.
        #[arg(long, value_enum, default_value_t = AuthMethod::ClientSecret)]
        auth_method: AuthMethod,
        /// With private_key_jwt, and only then: a file holding the client's public keys as
        /// a JWKS (RSA of 2048 bits or more, EC P-256 or OKP Ed25519; at most 10).
        #[arg(long, conflicts_with = "jwks_uri")]
        jwks_file: Option<std::path::PathBuf>,
        /// With private_key_jwt, instead of --jwks-file: the https URL where the partner
        /// publishes its JWKS, on a public address. Fetched and checked now; the servers
        /// fetch it again as its Cache-Control says.
        #[arg(long)]
        jwks_uri: Option<String>,
        /// A sandbox client, for a partner to practise against production: its tokens
        /// carry `sandbox`, and the intake-api keeps what it makes apart from real cases.
        /// For partners only: not with portal:redirect:redeem or revocations:read.
        #[arg(long)]
        sandbox: bool,
    },
    /// Make a client be as declared, with an id and secret the operator chose: created when
    /// absent, brought to the declaration when it differs, untouched (and no audit entry)
    /// when it is as declared. For a deployment's migration step, run at every start.
    ///
    /// A declared secret that differs replaces the client's secrets at once, with no grace.
    /// A disabled client, or one that authenticates otherwise, is refused.
    #[command(
        args = declarations(),
        after_help = "Examples:
  auth-server client ensure --id intake-api --name intake-api --scopes revocations:read \\
      --secret-env INTAKE_REVOCATIONS_CLIENT_SECRET   # the secret is read from that variable
  auth-server client ensure --id intake-api --name intake-api --scopes revocations:read \\
      --auth-method private_key_jwt --jwks-file intake-api-keys.json -o json"
    )]
    Ensure {
        /// The client's id, chosen by the operator: 1 to 64 ASCII letters, digits, '-', '_'
        /// or '.'.
        #[arg(long)]
        id: String,
        /// Partner name, for operators: unique, whatever its case.
        #[arg(long)]
        name: String,
        /// Space-separated scopes the client may be granted, in any order.
        #[arg(long)]
        scopes: String,
        /// With portal:redirect:redeem, and only then: the brands whose links the portal
        /// redeems, comma-separated.
        #[arg(long)]
        brands: Option<String>,
        /// How the client authenticates: the secret --secret-env names, or assertions
        /// signed with its own private key, whose public keys --jwks-file gives.
        #[arg(long, value_enum, default_value_t = AuthMethod::ClientSecret)]
        auth_method: AuthMethod,
        /// With client_secret: the environment variable holding the secret (at least 32
        /// characters), never the secret itself, which `ps` would show.
        #[arg(long, value_name = "VAR")]
        secret_env: Option<String>,
        /// With private_key_jwt: a file holding the client's public keys as a JWKS.
        #[arg(long)]
        jwks_file: Option<std::path::PathBuf>,
    },
    /// Replace the public keys of a private_key_jwt client, or the URL they are fetched
    /// from: assertions signed with the keys it had are refused from then on.
    #[command(
        args = key_changes(),
        after_help = "Examples:
  auth-server client set-keys CLIENT_ID --jwks-file acme-keys.json
  auth-server client set-keys CLIENT_ID --jwks-file acme-keys-2027.json --actor alice
  auth-server client set-keys CLIENT_ID --jwks-uri https://acme.example/jwks.json"
    )]
    SetKeys {
        /// The client's id.
        client_id: String,
        /// A file holding the client's public keys as a JWKS; list the key in use and the
        /// next one to roll over without an outage.
        #[arg(
            long,
            required_unless_present = "jwks_uri",
            conflicts_with = "jwks_uri"
        )]
        jwks_file: Option<std::path::PathBuf>,
        /// Instead of --jwks-file: the https URL where the partner publishes its JWKS, on a
        /// public address; fetched and checked now. The partner then rolls keys over by
        /// publishing them there.
        #[arg(long)]
        jwks_uri: Option<String>,
    },
    /// Make a client get only DPoP-bound tokens (RFC 9449), or bearer tokens again.
    ///
    /// Required, a token request without a DPoP proof is refused, so a token copied from
    /// the partner is of no use without its key.
    #[command(
        args = changes(),
        after_help = "Examples:
  auth-server client set-dpop CLIENT_ID --require-dpop true
  auth-server client set-dpop CLIENT_ID --require-dpop false --actor alice"
    )]
    SetDpop {
        /// The client's id.
        client_id: String,
        /// Whether a token request without a DPoP proof is refused.
        #[arg(long, action = clap::ArgAction::Set)]
        require_dpop: bool,
    },
    /// Bind a customer-portal client to the brands whose links it redeems, replacing those
    /// it had; its next token names them.
    #[command(
        args = changes(),
        after_help = "Examples:
  auth-server client set-brands CLIENT_ID --brands brand_a
  auth-server client set-brands CLIENT_ID --brands brand_a,brand_b --actor alice"
    )]
    SetBrands {
        /// The client's id.
        client_id: String,
        /// The brands, comma-separated, as the intake-api's INTAKE_BRANDS names them.
        #[arg(long)]
        brands: String,
    },
    /// List clients (never their secrets).
    #[command(
        args = reads::<AuthServerNames>(),
        after_help = "Examples:
  auth-server client list
  auth-server client list -o json | jq -r '.[] | select(.disabled) | .client_id'"
    )]
    List,
    /// Show one client, with the fingerprint and expiry of each of its secrets.
    #[command(
        args = reads::<AuthServerNames>(),
        after_help = "Examples:
  auth-server client show CLIENT_ID
  # The fingerprint of a secret you hold, to compare:
  printf %s \"$SECRET\" | openssl dgst -sha256 -binary | sha256sum | cut -c1-16"
    )]
    Show {
        /// The client's id.
        client_id: String,
    },
    /// Issue a new secret; the old one keeps working for the grace period.
    #[command(
        args = changes(),
        after_help = "Examples:
  auth-server client rotate-secret CLIENT_ID                    # the old secret works one more day
  auth-server client rotate-secret CLIENT_ID --grace-secs 3600"
    )]
    RotateSecret {
        /// The client's id.
        client_id: String,
        /// How long the previous secret keeps working, in seconds.
        #[arg(long, default_value_t = 86_400)]
        grace_secs: u64,
    },
    /// Disable a client: no more tokens, and resource servers refuse the ones it holds.
    #[command(
        args = changes(),
        after_help = "Examples:
  auth-server client disable CLIENT_ID --actor alice"
    )]
    Disable {
        /// The client's id.
        client_id: String,
    },
    /// Enable a disabled client again: its unexpired tokens work again too.
    #[command(
        args = changes(),
        after_help = "Examples:
  auth-server client enable CLIENT_ID --actor alice"
    )]
    Enable {
        /// The client's id.
        client_id: String,
    },
}

/// `auth-server key ...`
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Switch signing to the standby key, and publish a new standby.
    #[command(
        args = signing_key_changes(),
        after_help = "Examples:
  auth-server key rotate                          # the standby signs once every resource server holds it
  auth-server key rotate --publish-ahead-secs 0   # the standby signs now, however young
  auth-server key rotate --alg ES256              # a new P-256 key, published now, signs after the max-age
  AUTH_KEY_STORE=pkcs11 AUTH_PKCS11_MODULE=/usr/lib/softhsm/libsofthsm2.so AUTH_PKCS11_TOKEN_LABEL=prod \
    AUTH_PKCS11_PIN_FILE=/run/secrets/pin auth-server key rotate --move-key-store   # the keys move into the token"
    )]
    Rotate {
        /// The algorithm tokens are signed with from this rotation on: RS256 (the default,
        /// as the spec says), PS256 or ES256. Omitted: the current one. Another algorithm
        /// than the standby's brings a new key, published now and signing only once every
        /// resource server holds it.
        #[arg(long, value_parser = clap::value_parser!(TokenAlgorithm))]
        alg: Option<TokenAlgorithm>,
        /// The least time between the standby's publication and its first signature;
        /// defaults to the JWKS max-age (300), so every resource server caching the JWKS
        /// holds the key before it signs. A standby is usually older than that: it signs
        /// at once.
        #[arg(long, env = "AUTH_JWKS_MAX_AGE_SECS")]
        publish_ahead_secs: Option<u64>,
        /// Move the signing keys to the key store this command is given (AUTH_KEY_STORE and
        /// its settings) when the database records that they live in another: the standby
        /// of the old store is withdrawn, and the key that takes over and the new standby
        /// are made in the new one. Without it a rotation with another store is refused.
        /// Every replica must be able to load keys of both stores until the old keys retire.
        #[arg(long)]
        move_key_store: bool,
    },
    /// List keys with their state and dates.
    #[command(
        args = reads::<AuthServerNames>(),
        after_help = "Examples:
  auth-server key list
  auth-server key list -o json | jq -r '.[] | select(.state == \"active\") | .kid'"
    )]
    List {
        /// The servers' rotation schedule, in seconds: `rotates_at` then shows when the
        /// newest key is next rotated.
        #[arg(long, env = ROTATION_INTERVAL_VARIABLE)]
        rotation_interval_secs: Option<u64>,
    },
    /// Emergency: unpublish a key now; tokens it signed stop verifying. When it was
    /// signing, the standby key takes over at once. A key kept in a PKCS#11 token is
    /// destroyed there: the command needs the token's settings, and refuses without them
    /// before marking anything; run again on a revoked key, it destroys what is left.
    #[command(
        args = signing_key_changes(),
        after_help = "Examples:
  auth-server key revoke KID --actor alice"
    )]
    Revoke {
        /// The key's kid.
        kid: String,
    },
}

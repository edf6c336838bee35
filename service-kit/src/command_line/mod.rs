//! Both services' command lines: the shape of the line itself (the server, the migrations,
//! the operator commands), the settings they share ([`settings`]), how the commands print
//! ([`output`]) and what else they share ([`operator`]).

pub mod operator;
pub mod output;
pub mod settings;

use std::fmt::Debug;

use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::db::Schema;
use output::{OutputArg, OutputFormat, Report};
pub use settings::{
    Actor, Database, KeyEncryptionKeyArg, Listen, Logs, Migrate, ServedDatabase, millis, seconds,
    within,
};

/// What tells one service's command line from the other's: its binary, its help, and the
/// environment variables the shared settings are read from.
pub trait Service: Debug + Clone + Send + Sync + 'static {
    /// The binary, as operators type it.
    const BINARY: &'static str;
    /// Its version.
    const VERSION: &'static str;
    /// One line on what it is, for `--help`.
    const ABOUT: &'static str;
    /// The examples below the top-level help.
    const EXAMPLES: &'static str;
    /// The examples below `serve --help`.
    const SERVE_EXAMPLES: &'static str;
    /// The examples below `migrate --help`.
    const MIGRATE_EXAMPLES: &'static str;
    /// The variable of the address the server listens on.
    const BIND_VARIABLE: &'static str;
    /// Where the server listens when not told.
    const DEFAULT_BIND: &'static str;
    /// The variable of the separate `/metrics` listener's address.
    const ADMIN_BIND_VARIABLE: &'static str;
    /// The variable of the database URL.
    const DATABASE_VARIABLE: &'static str;
    /// Where the database is when not told: a SQLite file beside the binary.
    const DEFAULT_DATABASE_URL: &'static str;
    /// The variable saying whether `serve` migrates first.
    const MIGRATE_VARIABLE: &'static str;
    /// The variable naming who makes a change.
    const ACTOR_VARIABLE: &'static str;
    /// The variable of the key-encryption key.
    const KEK_VARIABLE: &'static str;
    /// The help of the operator commands' `--key-encryption-key`, naming what the service
    /// seals with it.
    const KEK_HELP: &'static str;
    /// The settings (by argument id) taken only from the environment or a file: on the
    /// command line `ps` shows them to every user of the machine, so a flag giving one is
    /// refused, naming the variable (and the `ID_file` argument, if any) to use instead.
    const SECRET_ARGUMENTS: &'static [&'static str] = &[];
}

/// The line as clap reads it, before a missing command is taken for `serve`.
#[derive(Debug, Parser)]
struct Line<S: Service, C: Args, O: Subcommand> {
    #[command(subcommand)]
    command: Option<Command<S, C, O>>,
}

#[derive(Debug, Subcommand)]
enum Command<S: Service, C: Args, O: Subcommand> {
    /// Run the HTTP server and its background work (the default).
    Serve(Box<C>),
    /// Apply database migrations and exit.
    Migrate(Migrate<S>),
    #[command(flatten)]
    Operate(O),
}

/// What a service's command line asks for: the server with its settings `C` (`serve`,
/// also with no command), the migrations, or one of its operator commands `O`.
#[derive(Debug)]
pub enum Cli<S: Service, C, O> {
    /// Run the server with these settings.
    Serve(Box<C>),
    /// Apply the database migrations.
    Migrate(Migrate<S>),
    /// An operator command.
    Operate(Box<Operation<O>>),
}

/// An operator command as given: what to do, how to print it, and the settings given with
/// it.
#[derive(Debug)]
pub struct Operation<O> {
    /// What to do.
    pub command: O,
    /// How to print what it did; see [`OutputFormat::or_default`].
    pub output: Option<OutputFormat>,
    /// The settings the command was given.
    pub given: Given,
}

/// The arguments the innermost subcommand was given, besides its own fields: which of the
/// shared settings a command takes is said where it is defined
/// (`#[command(args = args_of::<Database<S>>())]`), since the same command is also run
/// from code without them.
#[derive(Debug, Clone)]
pub struct Given {
    command: clap::Command,
    matches: ArgMatches,
}

impl Given {
    /// `A` as given, when the command takes `A`; `None` when it does not.
    pub fn settings<A: Args + FromArgMatches>(&self) -> Option<A> {
        let takes_them = args_of::<A>().iter().all(|arg| {
            self.command
                .get_arguments()
                .any(|defined| defined.get_id() == arg.get_id())
        });
        if !takes_them {
            return None;
        }
        A::from_arg_matches(&self.matches).ok()
    }
}

impl<S: Service, C: Args, O: Subcommand> Cli<S, C, O> {
    /// The process's command line; exits with a usage message when it does not parse.
    pub fn parse() -> Self {
        Self::try_parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// Parses `args` (the binary's name first), reading each setting from its flag or its
    /// environment variable.
    pub fn try_parse_from<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let line = Self::command();
        let matches = line.clone().try_get_matches_from(args)?;
        refuse_secrets_on_the_line::<S>(&line, &matches)?;
        Ok(match Line::<S, C, O>::from_arg_matches(&matches)?.command {
            None => Self::Serve(Box::new(server_settings::<S, C>()?)),
            Some(Command::Serve(config)) => Self::Serve(config),
            Some(Command::Migrate(migrate)) => Self::Migrate(migrate),
            Some(Command::Operate(command)) => {
                let (mut leaf, mut leaf_matches) = (&line, &matches);
                while let Some((name, sub)) = leaf_matches.subcommand() {
                    leaf = leaf
                        .find_subcommand(name)
                        .expect("clap matched a subcommand it defines");
                    leaf_matches = sub;
                }
                let given = Given {
                    command: leaf.clone(),
                    matches: leaf_matches.clone(),
                };
                Self::Operate(Box::new(Operation {
                    command,
                    output: given.settings::<OutputArg>().and_then(|o| o.output),
                    given,
                }))
            }
        })
    }

    /// Runs what the line asks for: `serve` (the service's [`crate::http::Server::serve`]),
    /// the migrations of `schema`, or an operator command, which `operate` runs with the
    /// settings `T` it was given and whose report is printed as asked (logging only
    /// warnings, as a command's output is its report).
    pub async fn run<M, T, Serving, Reporting>(
        self,
        serve: impl FnOnce(C) -> Serving,
        schema: &Schema<M>,
        operate: impl FnOnce(O, T) -> Reporting,
    ) -> anyhow::Result<()>
    where
        M: sea_orm_migration::MigratorTrait,
        T: for<'g> From<&'g Given>,
        Serving: Future<Output = anyhow::Result<()>>,
        Reporting: Future<Output = anyhow::Result<Report>>,
    {
        match self {
            Self::Serve(config) => serve(*config).await,
            Self::Migrate(migrate) => migrate.run(schema).await,
            Self::Operate(operation) => {
                operator::init_logs();
                let Operation {
                    command,
                    output,
                    given,
                } = *operation;
                operate(command, T::from(&given)).await?.print(output)
            }
        }
    }

    /// The command line's definition, for its help.
    pub fn command() -> clap::Command {
        let examples = |c: clap::Command| {
            c.mut_subcommand("serve", |serve| serve.after_help(S::SERVE_EXAMPLES))
                .mut_subcommand("migrate", |m| m.after_help(S::MIGRATE_EXAMPLES))
        };
        plain_usage(name_environment_only(
            examples(
                Line::<S, C, O>::command()
                    .name(S::BINARY)
                    .bin_name(S::BINARY)
                    .version(S::VERSION)
                    .about(S::ABOUT)
                    .after_help(S::EXAMPLES),
            ),
            S::SECRET_ARGUMENTS,
        ))
    }
}

/// The heading under which a command's help lists the settings it reads from the
/// environment only.
pub const ENVIRONMENT_ONLY: &str =
    "Read from the environment only (a flag is refused: `ps` shows flags to every user):";

/// `command` and each of its subcommands with the `secrets` they take listed in their help,
/// under [`ENVIRONMENT_ONLY`], by variable and as clap describes an argument: their flags
/// are refused, and so left out of the options, but an operator (and a deployment's check
/// of the variables it sets) must still find in the help every variable a command reads.
fn name_environment_only(command: clap::Command, secrets: &[&str]) -> clap::Command {
    with_every_subcommand(command, &|command| list_environment_only(command, secrets))
}

/// `command`'s own help with the `secrets` it takes listed ([`name_environment_only`]).
fn list_environment_only(command: clap::Command, secrets: &[&str]) -> clap::Command {
    let read: Vec<String> = command
        .get_arguments()
        .filter(|a| a.is_hide_set() && secrets.contains(&a.get_id().as_str()))
        .filter_map(|a| {
            let var = a.get_env()?.to_string_lossy().into_owned();
            let help = a.get_long_help().or(a.get_help())?.to_string();
            Some(format!("  {help}\n          [env: {var}]"))
        })
        .collect();
    if !read.is_empty() {
        let section = format!("{ENVIRONMENT_ONLY}\n{}", read.join("\n\n"));
        let help = match command.get_after_help() {
            Some(after) => format!("{section}\n\n{after}"),
            None => section,
        };
        return command.after_help(help);
    }
    command
}

/// `command` and every subcommand under it, at any depth, each changed by `change`, a
/// command before its subcommands.
fn with_every_subcommand(
    command: clap::Command,
    change: &impl Fn(clap::Command) -> clap::Command,
) -> clap::Command {
    let mut command = change(command);
    let names: Vec<String> = command
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, |c| with_every_subcommand(c, change));
    }
    command
}

/// Fails when `matches` (of `command`, or of one of its subcommands) took one of the
/// service's [`Service::SECRET_ARGUMENTS`] from the command line; the error names the flag
/// and where the secret is read from instead, never the value.
fn refuse_secrets_on_the_line<S: Service>(
    command: &clap::Command,
    matches: &ArgMatches,
) -> Result<(), clap::Error> {
    let argument = |id: &str| command.get_arguments().find(|a| a.get_id() == id);
    for id in matches.ids() {
        let id = id.as_str();
        let given = matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        let (true, Some(arg)) = (given && S::SECRET_ARGUMENTS.contains(&id), argument(id)) else {
            continue;
        };
        let flag = arg
            .get_long()
            .map_or_else(|| id.to_owned(), |l| format!("--{l}"));
        let mut instead = match arg.get_env() {
            Some(var) => format!("set {}", var.to_string_lossy()),
            None => "set it in the environment".to_owned(),
        };
        if let Some(file) = argument(&format!("{id}_file")) {
            let long = file.get_long().unwrap_or_default();
            instead.push_str(&format!(", or name a file holding it with --{long}"));
            if let Some(var) = file.get_env() {
                instead.push_str(&format!(" ({})", var.to_string_lossy()));
            }
        }
        let mut command = command.clone();
        return Err(command.error(
            clap::error::ErrorKind::ArgumentConflict,
            format!(
                "{flag} is not taken on the command line, where every user of the machine \
                 can read it (`ps`): {instead}"
            ),
        ));
    }
    match matches.subcommand() {
        Some((name, sub)) => match command.find_subcommand(name) {
            Some(subcommand) => refuse_secrets_on_the_line::<S>(subcommand, sub),
            None => Ok(()),
        },
        None => Ok(()),
    }
}

/// `command` with each (sub)command's usage line in errors the same as in its help. Left
/// to itself, clap's error for a missing argument lists in the usage line every option the
/// environment gave a value, as if it were required.
pub fn plain_usage(mut command: clap::Command) -> clap::Command {
    command.build();
    with_every_subcommand(command, &|mut command| {
        let usage = command.render_usage().to_string();
        let usage = usage.strip_prefix("Usage: ").unwrap_or(&usage).to_owned();
        command.override_usage(usage)
    })
}

/// The arguments `A` defines, for a subcommand that takes them besides its own fields:
/// `#[command(args = args_of::<A>())]`. [`Given::settings`] reads them back.
pub fn args_of<A: Args>() -> Vec<clap::Arg> {
    A::augment_args(clap::Command::new("settings"))
        .get_arguments()
        .cloned()
        .collect()
}

/// What a command that only reads takes besides its own arguments: the database, and how
/// to print.
pub fn reads<S: Service>() -> Vec<clap::Arg> {
    [args_of::<Database<S>>(), args_of::<OutputArg>()].concat()
}

/// The server's settings `C` from the environment alone, as the binary with no command
/// reads them.
pub fn server_settings<S: Service, C: Args>() -> Result<C, clap::Error> {
    let command = C::augment_args(clap::Command::new(S::BINARY));
    C::from_arg_matches(&command.try_get_matches_from([S::BINARY])?)
}

#[cfg(test)]
mod tests {
    use clap::Arg;

    use super::*;
    use crate::telemetry::LogFormat;

    #[derive(Debug, Clone)]
    struct Demo;

    impl Service for Demo {
        const BINARY: &'static str = "demo";
        const VERSION: &'static str = "1.2.3";
        const ABOUT: &'static str = "A demo.";
        const EXAMPLES: &'static str = "Examples:\n  demo";
        const SERVE_EXAMPLES: &'static str = "Examples:\n  demo serve";
        const MIGRATE_EXAMPLES: &'static str = "Examples:\n  demo migrate";
        const BIND_VARIABLE: &'static str = "DEMO_TEST_BIND";
        const DEFAULT_BIND: &'static str = "127.0.0.1:1";
        const ADMIN_BIND_VARIABLE: &'static str = "DEMO_TEST_ADMIN_BIND";
        const DATABASE_VARIABLE: &'static str = "DEMO_TEST_DATABASE_URL";
        const DEFAULT_DATABASE_URL: &'static str = "sqlite://demo.db?mode=rwc";
        const MIGRATE_VARIABLE: &'static str = "DEMO_TEST_MIGRATE";
        const ACTOR_VARIABLE: &'static str = "DEMO_TEST_ACTOR";
        const KEK_VARIABLE: &'static str = "DEMO_TEST_KEY_ENCRYPTION_KEY";
        const KEK_HELP: &'static str = "The demo's key";
    }

    #[derive(Debug, Clone, Args)]
    struct Server {
        #[command(flatten)]
        listen: Listen<Demo>,
        #[command(flatten)]
        database: ServedDatabase<Demo>,
    }

    #[derive(Debug, Subcommand)]
    enum Operator {
        #[command(args = [args_of::<Database<Demo>>(), args_of::<OutputArg>()].concat())]
        Show { id: String },
        #[command(args = [
            args_of::<Database<Demo>>(),
            args_of::<Actor<Demo>>(),
            args_of::<KeyEncryptionKeyArg<Demo>>(),
        ].concat())]
        Change,
    }

    type DemoCli = Cli<Demo, Server, Operator>;

    fn parse(args: &[&str]) -> Result<DemoCli, clap::Error> {
        DemoCli::try_parse_from(std::iter::once("demo").chain(args.iter().copied()))
    }

    #[test]
    fn no_command_serves_with_the_defaults() {
        let Ok(Cli::Serve(server)) = parse(&[]) else {
            panic!("not serve");
        };
        assert_eq!(server.listen.bind, "127.0.0.1:1");
        assert_eq!(server.database.url(), "sqlite://demo.db?mode=rwc");
        assert!(server.database.migrates(), "SQLite migrates by default");
        let Ok(Cli::Serve(server)) = parse(&[
            "serve",
            "--database-url",
            "postgres://demo@db/demo",
            "--admin-bind",
            "127.0.0.1:2",
        ]) else {
            panic!("not serve");
        };
        assert!(!server.database.migrates(), "PostgreSQL does not");
        assert_eq!(server.listen.admin_bind.as_deref(), Some("127.0.0.1:2"));
    }

    #[test]
    fn migrate_takes_the_database_and_the_log_format() {
        let Ok(Cli::Migrate(migrate)) = parse(&[
            "migrate",
            "--database-url",
            "postgres://demo@db/demo",
            "--log-format",
            "json",
        ]) else {
            panic!("not migrate");
        };
        assert_eq!(migrate.database.url.expose(), "postgres://demo@db/demo");
        assert_eq!(migrate.logs.log_format, LogFormat::Json);
        assert!(parse(&["migrate", "--actor", "alice"]).is_err());
    }

    #[test]
    fn settings_are_read_from_the_subcommand_that_takes_them() {
        let Ok(Cli::Operate(show)) = parse(&["show", "7", "-o", "json"]) else {
            panic!("not an operation");
        };
        assert!(matches!(show.command, Operator::Show { ref id } if id == "7"));
        assert_eq!(show.output, Some(OutputFormat::Json));
        assert!(show.given.settings::<Actor<Demo>>().is_none());
        let database = show.given.settings::<Database<Demo>>().unwrap();
        assert_eq!(database.url.expose(), "sqlite://demo.db?mode=rwc");

        let Ok(Cli::Operate(change)) = parse(&["change", "--actor", "alice"]) else {
            panic!("not an operation");
        };
        assert_eq!(change.output, None);
        let actor = change.given.settings::<Actor<Demo>>().unwrap();
        assert_eq!(actor.actor.as_deref(), Some("alice"));
        assert!(
            parse(&["change", "-o", "json"]).is_err(),
            "change does not print"
        );
    }

    #[test]
    fn the_key_encryption_key_is_named_and_explained_by_the_service() {
        let Ok(Cli::Operate(change)) = parse(&["change", "--key-encryption-key", "a2V5"]) else {
            panic!("not an operation");
        };
        let kek = change
            .given
            .settings::<KeyEncryptionKeyArg<Demo>>()
            .unwrap();
        assert_eq!(kek.key_encryption_key.unwrap().expose(), "a2V5");
        let Ok(Cli::Operate(show)) = parse(&["show", "7"]) else {
            panic!("not an operation");
        };
        assert!(show.given.settings::<KeyEncryptionKeyArg<Demo>>().is_none());

        let help = DemoCli::command()
            .find_subcommand_mut("change")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(help.contains("The demo's key"), "{help}");
        assert!(
            help.contains("[env: DEMO_TEST_KEY_ENCRYPTION_KEY]"),
            "{help}"
        );
    }

    /// Demo, taking its key-encryption key only from the environment.
    #[derive(Debug, Clone)]
    struct Strict;

    impl Service for Strict {
        const BINARY: &'static str = Demo::BINARY;
        const VERSION: &'static str = Demo::VERSION;
        const ABOUT: &'static str = Demo::ABOUT;
        const EXAMPLES: &'static str = Demo::EXAMPLES;
        const SERVE_EXAMPLES: &'static str = Demo::SERVE_EXAMPLES;
        const MIGRATE_EXAMPLES: &'static str = Demo::MIGRATE_EXAMPLES;
        const BIND_VARIABLE: &'static str = Demo::BIND_VARIABLE;
        const DEFAULT_BIND: &'static str = Demo::DEFAULT_BIND;
        const ADMIN_BIND_VARIABLE: &'static str = Demo::ADMIN_BIND_VARIABLE;
        const DATABASE_VARIABLE: &'static str = Demo::DATABASE_VARIABLE;
        const DEFAULT_DATABASE_URL: &'static str = Demo::DEFAULT_DATABASE_URL;
        const MIGRATE_VARIABLE: &'static str = Demo::MIGRATE_VARIABLE;
        const ACTOR_VARIABLE: &'static str = Demo::ACTOR_VARIABLE;
        const KEK_VARIABLE: &'static str = Demo::KEK_VARIABLE;
        const KEK_HELP: &'static str = Demo::KEK_HELP;
        const SECRET_ARGUMENTS: &'static [&'static str] = &["key_encryption_key"];
    }

    #[derive(Debug, Subcommand)]
    enum StrictOperator {
        #[command(args = [
            args_of::<Database<Strict>>(),
            args_of::<KeyEncryptionKeyArg<Strict>>(),
        ].concat())]
        Change,
    }

    #[test]
    fn a_secret_argument_on_the_command_line_is_refused_without_its_value() {
        type StrictCli = Cli<Strict, Server, StrictOperator>;
        for line in [
            &["demo", "change", "--key-encryption-key", "a2V5c2VjcmV0"][..],
            &["demo", "change", "--key-encryption-key=a2V5c2VjcmV0"],
        ] {
            let error = StrictCli::try_parse_from(line).unwrap_err();
            let said = error.to_string();
            assert_eq!(error.exit_code(), 2, "{said}");
            assert!(
                said.contains("--key-encryption-key is not taken on the command line")
                    && said.contains("set DEMO_TEST_KEY_ENCRYPTION_KEY"),
                "{said}"
            );
            assert!(!said.contains("a2V5c2VjcmV0"), "{said}");
        }
        assert!(StrictCli::try_parse_from(["demo", "change"]).is_ok());
        // Other services take it as before.
        assert!(parse(&["change", "--key-encryption-key", "a2V5"]).is_ok());
    }

    #[test]
    fn a_command_names_in_its_help_the_secrets_it_reads_from_the_environment_only() {
        let mut command = Cli::<Strict, Server, StrictOperator>::command();
        let change = command
            .find_subcommand_mut("change")
            .unwrap()
            .render_long_help()
            .to_string();
        let section = change
            .split(ENVIRONMENT_ONLY)
            .nth(1)
            .unwrap_or_else(|| panic!("no section of secrets: {change}"));
        assert!(
            section.contains("[env: DEMO_TEST_KEY_ENCRYPTION_KEY]"),
            "{change}"
        );
        assert!(!change.contains("--key-encryption-key"), "{change}");
        // Where the flag is taken, it is an option like any other, and not listed apart.
        let mut command = DemoCli::command();
        let change = command
            .find_subcommand_mut("change")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(!change.contains(ENVIRONMENT_ONLY), "{change}");
    }

    #[test]
    fn the_help_names_the_service() {
        let help = DemoCli::command().render_long_help().to_string();
        assert!(help.starts_with("A demo."), "{help}");
        assert!(help.contains("Usage: demo [COMMAND]"), "{help}");
        let mut command = DemoCli::command();
        let migrate = command
            .find_subcommand_mut("migrate")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(
            migrate.contains("[env: DEMO_TEST_DATABASE_URL]"),
            "{migrate}"
        );
        assert!(
            migrate.ends_with("Examples:\n  demo migrate\n"),
            "{migrate}"
        );
        assert_eq!(command.get_version(), Some("1.2.3"));
    }

    #[test]
    fn a_missing_argument_shows_the_usage_line_of_the_help() {
        // PATH is set: an option it is the environment variable of has a value from it.
        let command = clap::Command::new("x").subcommand(
            clap::Command::new("show")
                .arg(Arg::new("from_env").long("from-env").env("PATH"))
                .arg(Arg::new("id").required(true)),
        );
        let error = command
            .clone()
            .try_get_matches_from(["x", "show"])
            .unwrap_err();
        assert!(error.to_string().contains("--from-env"), "{error}");
        let error = plain_usage(command)
            .try_get_matches_from(["x", "show"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("Usage: x show [OPTIONS] <id>\n"), "{error}");
    }
}

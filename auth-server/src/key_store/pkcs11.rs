//! Signing keys inside a PKCS#11 token (an HSM; SoftHSM2 in tests): made there sensitive and
//! not extractable, labelled by their kid, and used through a pool of sessions.
//!
//! A token can go away and come back (an HSM restarted, a network HSM out of reach, a token
//! directory briefly missing). The pool notices from what the library answers, drops its
//! sessions and opens new ones, finding the keys again by their labels, once the token
//! answers; between attempts it waits, longer each time up to [`MAX_BACKOFF`], so an outage
//! is not a busy loop. Where the library itself holds the token as lost (SoftHSM2 does, for
//! as long as the process lives), it is finalised and initialised again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error as CkError, RvError};
use cryptoki::mechanism::rsa::{PkcsMgfType, PkcsPssParams};
use cryptoki::mechanism::{Mechanism, MechanismType};
use cryptoki::object::{Attribute, AttributeType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::slot::Slot;
use cryptoki::types::AuthPin;
use service_kit::Secret;
use shared::claims::TokenAlgorithm;

use super::KeyVault;
use crate::keys::{ExternalKey, Jwk};

/// What the database keeps before a PKCS#11 key's label: `pkcs11:LABEL`.
pub const SCHEME: &str = "pkcs11";

/// The DER of the named curve P-256 (prime256v1), as `CKA_EC_PARAMS` wants it.
const P256: [u8; 10] = [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

/// The wait before the second attempt to reach a token that stopped answering (the first
/// is at once); it doubles with each failure.
const MIN_BACKOFF: Duration = Duration::from_millis(250);
/// The longest wait between two attempts to reach a token that does not answer.
pub const MAX_BACKOFF: Duration = Duration::from_secs(4);

/// Where the token is and how to log in to it.
#[derive(Debug, Clone)]
pub struct TokenSettings {
    /// The PKCS#11 library's path.
    pub module: PathBuf,
    /// The token's label.
    pub token_label: String,
    /// The user PIN.
    pub pin: Secret<String>,
    /// Sessions kept open for signing: as many signatures as there are can run at once.
    pub sessions: usize,
}

/// A PKCS#11 library loaded in this process, and how many times it has been initialised.
struct Library {
    context: Pkcs11,
    /// The number of the library's current initialisation. Every call into the library
    /// holds it for reading; finalising and initialising again holds it for writing, as no
    /// call may run into a `C_Finalize`.
    generation: RwLock<u64>,
}

impl Library {
    /// The library at `module`, loaded and initialised once per process: PKCS#11 allows one
    /// initialisation per application, which every server, command and test in the process
    /// then shares.
    fn get(module: &Path) -> anyhow::Result<Arc<Self>> {
        static LOADED: OnceLock<Mutex<HashMap<PathBuf, Arc<Library>>>> = OnceLock::new();
        let mut loaded = LOADED
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(library) = loaded.get(module) {
            return Ok(library.clone());
        }
        if !module.is_file() {
            bail!(
                "AUTH_PKCS11_MODULE {}: no such file (the token's PKCS#11 library)",
                module.display()
            );
        }
        let context = Pkcs11::new(module)
            .with_context(|| format!("cannot load the PKCS#11 library {}", module.display()))?;
        initialize(&context).with_context(|| format!("cannot initialise {}", module.display()))?;
        let library = Arc::new(Self {
            context,
            generation: RwLock::new(0),
        });
        loaded.insert(module.to_owned(), library.clone());
        Ok(library)
    }

    /// Finalises and initialises the library again, unless that was done since `seen`
    /// (another token of the process saw the same outage first): the generation it is in
    /// now. Every session opened before is gone, and its handle may be given to a new one.
    fn restart(&self, seen: u64) -> anyhow::Result<u64> {
        let mut generation = self.generation.write().unwrap_or_else(|e| e.into_inner());
        if *generation != seen {
            return Ok(*generation);
        }
        *generation += 1;
        // Not initialised (an earlier restart failed half-way) is what finalising wants.
        match self.context.clone().finalize() {
            Ok(()) | Err(CkError::Pkcs11(RvError::CryptokiNotInitialized, _)) => {}
            Err(e) => tracing::debug!(error = %e, "C_Finalize failed; initialising anyway"),
        }
        initialize(&self.context).context("cannot initialise the PKCS#11 library again")?;
        Ok(*generation)
    }
}

/// `C_Initialize` for several threads; already initialised (by another user of the library
/// in this process) is fine.
fn initialize(context: &Pkcs11) -> cryptoki::error::Result<()> {
    match context.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
        Ok(()) | Err(CkError::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The library at `module`, loaded and initialised once per process.
pub fn library(module: &Path) -> anyhow::Result<Pkcs11> {
    Ok(Library::get(module)?.context.clone())
}

/// Whether `error` says the session, the login or the token is gone, rather than that the
/// operation was wrong: the pool is then dropped and opened again.
fn is_lost(error: &CkError) -> bool {
    matches!(
        error,
        CkError::Pkcs11(
            RvError::SessionHandleInvalid
                | RvError::SessionClosed
                | RvError::UserNotLoggedIn
                | RvError::DeviceRemoved
                | RvError::DeviceError
                | RvError::DeviceMemory
                | RvError::TokenNotPresent
                | RvError::TokenNotRecognized
                | RvError::SlotIdInvalid
                | RvError::CryptokiNotInitialized
                | RvError::GeneralError
                // A key whose handle no longer names it: the token was reloaded (SoftHSM2
                // answers this first when its token files go away).
                | RvError::ObjectHandleInvalid
                | RvError::KeyHandleInvalid,
            _
        )
    )
}

/// A logged-in token and the sessions its signatures go through.
pub struct TokenVault {
    library: Arc<Library>,
    settings: TokenSettings,
    pool: Mutex<Pool>,
    /// The private keys found so far, by label, with the opening of the pool they were
    /// found in: found once, not for every signature. Apart from the pool, as it is looked
    /// up while a call into the library is under way.
    keys: Mutex<(u64, HashMap<String, ObjectHandle>)>,
}

/// The sessions open with the token, or when to try again to open them.
struct Pool {
    /// None while the token does not answer.
    live: Option<Live>,
    /// When the token may be tried next, after a failed attempt.
    retry_at: Option<Instant>,
    /// The wait after the next failed attempt.
    backoff: Duration,
    /// How many times the pool was opened: what the key handles found belong to.
    openings: u64,
}

/// Sessions opened with the token in one initialisation of the library.
struct Live {
    generation: u64,
    opening: u64,
    slot: Slot,
    /// Open sessions waiting for the next operation.
    idle: Vec<Session>,
    /// Never used for work nor closed while the pool lives: a token forgets the login
    /// when an application's last session closes.
    login: Session,
}

impl Live {
    /// Lets go of the sessions: closed when the library is still in the initialisation
    /// they were opened in, forgotten otherwise, as their handles may now be others'.
    fn release(self, library: &Library) {
        let generation = library.generation.read().unwrap_or_else(|e| e.into_inner());
        if self.generation == *generation {
            drop(self.idle);
            drop(self.login);
        } else {
            std::mem::forget(self.idle);
            std::mem::forget(self.login);
        }
    }
}

/// A session taken from the pool for one operation.
struct Borrowed {
    session: Session,
    generation: u64,
    opening: u64,
}

impl std::fmt::Debug for TokenVault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenVault")
            .field("token", &self.settings.token_label)
            .finish_non_exhaustive()
    }
}

impl TokenVault {
    /// Opens the token named in `settings` and logs in: fails, saying which, when the
    /// library, the token or the PIN is wrong.
    pub fn open(settings: &TokenSettings) -> anyhow::Result<Self> {
        let library = Library::get(&settings.module)?;
        let generation = *library.generation.read().unwrap_or_else(|e| e.into_inner());
        let settings = TokenSettings {
            sessions: settings.sessions.max(1),
            ..settings.clone()
        };
        let live = connect(&library, &settings, generation, 1)?;
        Ok(Self {
            library,
            settings,
            pool: Mutex::new(Pool {
                live: Some(live),
                retry_at: None,
                backoff: MIN_BACKOFF,
                openings: 1,
            }),
            keys: Mutex::default(),
        })
    }

    fn label(&self) -> &str {
        &self.settings.token_label
    }

    /// Runs `work` with a session of the pool, opened when none is idle.
    fn with_session<T>(
        &self,
        work: impl Fn(&Session) -> cryptoki::error::Result<T>,
    ) -> anyhow::Result<T> {
        self.run(|session, _| Ok(work(session)?))
    }

    /// Runs `work` with a session of the pool and a way to find a private key by label.
    /// When the library says the session or the token is gone, the pool is dropped and
    /// opened again at once for one more try; a session whose work failed otherwise is
    /// closed rather than kept.
    fn run<T>(
        &self,
        work: impl Fn(&Session, &dyn Fn(&str) -> anyhow::Result<ObjectHandle>) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let mut tries = 0;
        loop {
            tries += 1;
            let borrowed = self.borrow()?;
            let done = {
                let generation = self
                    .library
                    .generation
                    .read()
                    .unwrap_or_else(|e| e.into_inner());
                if *generation != borrowed.generation {
                    Err(anyhow!(CkError::Pkcs11(
                        RvError::CryptokiNotInitialized,
                        cryptoki::context::Function::Initialize
                    )))
                } else {
                    work(&borrowed.session, &|label| {
                        self.private_key(&borrowed, label)
                    })
                }
            };
            let lost = done
                .as_ref()
                .err()
                .and_then(|e| e.downcast_ref::<CkError>())
                .is_some_and(is_lost);
            match done {
                Ok(value) => {
                    self.give_back(borrowed);
                    return Ok(value);
                }
                Err(e) if lost => {
                    self.lose(borrowed, &e);
                    if tries >= 2 {
                        return Err(e).with_context(|| format!("token {}", self.label()));
                    }
                }
                Err(e) => {
                    self.release_session(borrowed);
                    return Err(e).with_context(|| format!("token {}", self.label()));
                }
            }
        }
    }

    /// A session of the live pool; the pool is opened first when the token has not been
    /// answering and the wait since the last attempt is over.
    fn borrow(&self) -> anyhow::Result<Borrowed> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        let generation_now = *self
            .library
            .generation
            .read()
            .unwrap_or_else(|e| e.into_inner());
        if pool
            .live
            .as_ref()
            .is_some_and(|l| l.generation != generation_now)
        {
            // The library was initialised again for another token of the process.
            if let Some(stale) = pool.live.take() {
                stale.release(&self.library);
            }
        }
        if pool.live.is_none() {
            let now = Instant::now();
            if let Some(at) = pool.retry_at.filter(|at| *at > now) {
                bail!(
                    "token {} is not answering; the next attempt to reach it is in {} ms",
                    self.label(),
                    (at - now).as_millis()
                );
            }
            pool.openings += 1;
            match self.reconnect(generation_now, pool.openings) {
                Ok(live) => {
                    if pool.retry_at.is_some() {
                        tracing::info!(token = %self.label(), "the PKCS#11 token answers again");
                    }
                    pool.live = Some(live);
                    pool.retry_at = None;
                    pool.backoff = MIN_BACKOFF;
                }
                Err(e) => {
                    tracing::warn!(
                        token = %self.label(),
                        error = format!("{e:#}"),
                        retry_in_ms = pool.backoff.as_millis() as u64,
                        "the PKCS#11 token cannot be reached"
                    );
                    pool.retry_at = Some(now + pool.backoff);
                    pool.backoff = (pool.backoff * 2).min(MAX_BACKOFF);
                    return Err(e);
                }
            }
        }
        let live = pool.live.as_mut().expect("opened above");
        let session = match live.idle.pop() {
            Some(session) => session,
            None => {
                let _calls = self
                    .library
                    .generation
                    .read()
                    .unwrap_or_else(|e| e.into_inner());
                self.library
                    .context
                    .open_rw_session(live.slot)
                    .with_context(|| format!("cannot open a session with token {}", self.label()))?
            }
        };
        Ok(Borrowed {
            session,
            generation: live.generation,
            opening: live.opening,
        })
    }

    /// Opens the pool again: with the library as it is, and when the token cannot be
    /// found or opened that way, after initialising the library again, as some libraries
    /// (SoftHSM2) never show a token again in the initialisation that lost it.
    fn reconnect(&self, generation: u64, opening: u64) -> anyhow::Result<Live> {
        match connect(&self.library, &self.settings, generation, opening) {
            Ok(live) => Ok(live),
            Err(first) => {
                tracing::debug!(
                    error = format!("{first:#}"),
                    "reopening the token failed; initialising the library again"
                );
                let generation = self.library.restart(generation)?;
                connect(&self.library, &self.settings, generation, opening)
            }
        }
    }

    /// Returns a session whose work succeeded to the pool, unless the pool was dropped
    /// or is full meanwhile.
    fn give_back(&self, borrowed: Borrowed) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        match pool.live.as_mut() {
            Some(live)
                if live.opening == borrowed.opening && live.idle.len() < self.settings.sessions =>
            {
                live.idle.push(borrowed.session);
            }
            _ => self.release_session(borrowed),
        }
    }

    /// Drops the pool after `error` said the token or a session is gone.
    fn lose(&self, borrowed: Borrowed, error: &anyhow::Error) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool
            .live
            .as_ref()
            .is_some_and(|l| l.opening == borrowed.opening)
        {
            tracing::warn!(
                token = %self.label(),
                error = format!("{error:#}"),
                "a PKCS#11 session failed: its sessions are dropped and the token opened again"
            );
            if let Some(live) = pool.live.take() {
                live.release(&self.library);
            }
        }
        drop(pool);
        self.release_session(borrowed);
    }

    /// Closes a session, or forgets it when the library was initialised again since it
    /// was opened.
    fn release_session(&self, borrowed: Borrowed) {
        let generation = self
            .library
            .generation
            .read()
            .unwrap_or_else(|e| e.into_inner());
        if *generation == borrowed.generation {
            drop(borrowed.session);
        } else {
            std::mem::forget(borrowed.session);
        }
    }

    /// The private key object labelled `label`, as the pool `borrowed` came from knows it.
    fn private_key(&self, borrowed: &Borrowed, label: &str) -> anyhow::Result<ObjectHandle> {
        {
            let keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
            if keys.0 == borrowed.opening
                && let Some(handle) = keys.1.get(label)
            {
                return Ok(*handle);
            }
        }
        let found = borrowed.session.find_objects(&[
            Attribute::Class(ObjectClass::PRIVATE_KEY),
            Attribute::Label(label.as_bytes().to_vec()),
        ])?;
        let handle = match found.as_slice() {
            [one] => *one,
            [] => bail!(
                "token {} holds no private key labelled {label}: the signing key it names \
                 is missing",
                self.label()
            ),
            _ => bail!(
                "token {} holds {} private keys labelled {label}",
                self.label(),
                found.len()
            ),
        };
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if keys.0 != borrowed.opening {
            *keys = (borrowed.opening, HashMap::new());
        }
        keys.1.insert(label.to_owned(), handle);
        Ok(handle)
    }
}

/// Finds the token `settings` names in the library's initialisation `generation`, opens a
/// session and logs in: fails, saying which, when the token or the PIN is wrong.
fn connect(
    library: &Library,
    settings: &TokenSettings,
    generation: u64,
    opening: u64,
) -> anyhow::Result<Live> {
    let calls = library.generation.read().unwrap_or_else(|e| e.into_inner());
    if *calls != generation {
        bail!("the PKCS#11 library was initialised again meanwhile");
    }
    let context = &library.context;
    let slot = find_token(context, &settings.token_label)?;
    let login = context
        .open_rw_session(slot)
        .context("cannot open a session with the token")?;
    let pin = AuthPin::from(settings.pin.expose().clone());
    match login.login(UserType::User, Some(&pin)) {
        Ok(()) | Err(CkError::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => {}
        Err(CkError::Pkcs11(RvError::PinIncorrect | RvError::PinInvalid, _)) => bail!(
            "the PIN for token {} is wrong (AUTH_PKCS11_PIN or AUTH_PKCS11_PIN_FILE)",
            settings.token_label
        ),
        Err(e) => {
            return Err(e)
                .with_context(|| format!("cannot log in to token {}", settings.token_label));
        }
    }
    Ok(Live {
        generation,
        opening,
        slot,
        idle: Vec::new(),
        login,
    })
}

/// The slot of the initialised token labelled `label`.
pub fn find_token(context: &Pkcs11, label: &str) -> anyhow::Result<Slot> {
    let slots = context
        .get_slots_with_initialized_token()
        .context("cannot list the PKCS#11 library's tokens")?;
    for slot in slots {
        let info = context.get_token_info(slot)?;
        if info.label().trim_end() == label {
            return Ok(slot);
        }
    }
    bail!("no initialised PKCS#11 token is labelled {label:?} (AUTH_PKCS11_TOKEN_LABEL)")
}

/// A key of the token: its label, by which the vault finds its private key object again
/// whenever it opens the token anew.
struct TokenKey {
    vault: Arc<TokenVault>,
    label: String,
}

impl ExternalKey for TokenKey {
    fn sign(&self, alg: TokenAlgorithm, message: &[u8]) -> anyhow::Result<Vec<u8>> {
        let mechanism = match alg {
            TokenAlgorithm::Rs256 => Mechanism::Sha256RsaPkcs,
            TokenAlgorithm::Ps256 => Mechanism::Sha256RsaPkcsPss(PkcsPssParams {
                hash_alg: MechanismType::SHA256,
                mgf: PkcsMgfType::MGF1_SHA256,
                s_len: 32.into(),
            }),
            // The digest made here and signed by CKM_ECDSA, which every token has (SoftHSM2
            // has no CKM_ECDSA_SHA256); PKCS#11 gives r || s, which is what JWS wants.
            TokenAlgorithm::Es256 => Mechanism::Ecdsa,
        };
        let digest;
        let input = if alg == TokenAlgorithm::Es256 {
            digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, message);
            digest.as_ref()
        } else {
            message
        };
        self.vault.run(|s, key| {
            let handle = key(&self.label)?;
            Ok(s.sign(&mechanism, handle, input)?)
        })
    }
}

/// The vault of one token, shared by its keys.
pub struct Pkcs11Vault(pub Arc<TokenVault>);

impl KeyVault for Pkcs11Vault {
    fn scheme(&self) -> &'static str {
        SCHEME
    }

    fn generate(&self, alg: TokenAlgorithm) -> anyhow::Result<(String, Jwk)> {
        // Made under a name of its own, then labelled by its kid, known only once the
        // public half is.
        let making = format!("partner-intake-new-{}", uuid::Uuid::new_v4());
        let label = Attribute::Label(making.as_bytes().to_vec());
        let private = [
            Attribute::Token(true),
            Attribute::Private(true),
            Attribute::Sensitive(true),
            Attribute::Extractable(false),
            Attribute::Sign(true),
            label.clone(),
        ];
        let (mechanism, public) = match alg {
            TokenAlgorithm::Rs256 | TokenAlgorithm::Ps256 => (
                Mechanism::RsaPkcsKeyPairGen,
                vec![
                    Attribute::Token(true),
                    Attribute::Private(false),
                    Attribute::Verify(true),
                    Attribute::ModulusBits(2048.into()),
                    Attribute::PublicExponent(vec![0x01, 0x00, 0x01]),
                    label,
                ],
            ),
            TokenAlgorithm::Es256 => (
                Mechanism::EccKeyPairGen,
                vec![
                    Attribute::Token(true),
                    Attribute::Private(false),
                    Attribute::Verify(true),
                    Attribute::EcParams(P256.to_vec()),
                    label,
                ],
            ),
        };
        let token = &self.0;
        let (public_key, private_key) =
            token.with_session(|s| s.generate_key_pair(&mechanism, &public, &private))?;
        let jwk = token
            .with_session(|s| {
                s.get_attributes(
                    public_key,
                    &[
                        AttributeType::Modulus,
                        AttributeType::PublicExponent,
                        AttributeType::EcPoint,
                    ],
                )
            })
            .and_then(|attributes| public_jwk(alg, &attributes))?;
        let kid = jwk.thumbprint();
        let named = [
            Attribute::Label(kid.as_bytes().to_vec()),
            Attribute::Id(kid.as_bytes().to_vec()),
        ];
        token.with_session(|s| {
            s.update_attributes(public_key, &named)?;
            s.update_attributes(private_key, &named)
        })?;
        Ok((kid.clone(), jwk.with_kid(kid)))
    }

    fn key(&self, name: &str) -> anyhow::Result<Arc<dyn ExternalKey>> {
        // Found now, so that a key missing from the token is named at start.
        self.0.run(|_, key| key(name))?;
        Ok(Arc::new(TokenKey {
            vault: self.0.clone(),
            label: name.to_owned(),
        }))
    }

    fn destroy(&self, name: &str) -> anyhow::Result<()> {
        let objects = self
            .0
            .with_session(|s| s.find_objects(&[Attribute::Label(name.as_bytes().to_vec())]))?;
        for object in objects {
            self.0.with_session(|s| s.destroy_object(object))?;
        }
        Ok(())
    }
}

/// The JWK of a public key object's `attributes` (modulus and exponent, or the EC point).
fn public_jwk(alg: TokenAlgorithm, attributes: &[Attribute]) -> anyhow::Result<Jwk> {
    let mut modulus = None;
    let mut exponent = None;
    let mut point = None;
    for attribute in attributes {
        match attribute {
            Attribute::Modulus(n) => modulus = Some(n.as_slice()),
            Attribute::PublicExponent(e) => exponent = Some(e.as_slice()),
            Attribute::EcPoint(p) => point = Some(p.as_slice()),
            _ => {}
        }
    }
    let strip = |bytes: &[u8]| -> Vec<u8> {
        let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
        bytes[first..].to_vec()
    };
    match (alg, modulus, exponent, point) {
        (TokenAlgorithm::Rs256 | TokenAlgorithm::Ps256, Some(n), Some(e), _) => {
            Ok(Jwk::rsa(alg, String::new(), &strip(n), &strip(e)))
        }
        (TokenAlgorithm::Es256, _, _, Some(point)) => {
            // The uncompressed point, bare or wrapped in a DER OCTET STRING (0x04, 65).
            let point = match point {
                [0x04, 0x41, rest @ ..] if rest.len() == 65 => rest,
                bare => bare,
            };
            match point {
                [0x04, xy @ ..] if xy.len() == 64 => {
                    Ok(Jwk::p256(alg, String::new(), &xy[..32], &xy[32..]))
                }
                _ => Err(anyhow!(
                    "the token's P-256 public key is not an uncompressed point"
                )),
            }
        }
        _ => Err(anyhow!("the token did not give the new key's public half")),
    }
}

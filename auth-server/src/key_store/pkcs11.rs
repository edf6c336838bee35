//! Signing keys inside a PKCS#11 token (an HSM; SoftHSM2 in tests): made there sensitive and
//! not extractable, labelled by their kid, and used through a pool of sessions.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

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

/// A logged-in token and the sessions its signatures go through.
pub struct TokenVault {
    context: Pkcs11,
    slot: Slot,
    label: String,
    /// Open sessions waiting for the next signature. One more, `_login`, is never closed:
    /// a token forgets the login when an application's last session closes.
    idle: Mutex<Vec<Session>>,
    sessions: usize,
    _login: Mutex<Session>,
}

impl std::fmt::Debug for TokenVault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenVault")
            .field("token", &self.label)
            .finish_non_exhaustive()
    }
}

/// The library at `module`, loaded and initialised once per process: PKCS#11 allows one
/// initialisation per application, which every server, command and test in the process
/// then shares.
pub fn library(module: &Path) -> anyhow::Result<Pkcs11> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, Pkcs11>>> = OnceLock::new();
    let mut loaded = LOADED
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(context) = loaded.get(module) {
        return Ok(context.clone());
    }
    if !module.is_file() {
        bail!(
            "AUTH_PKCS11_MODULE {}: no such file (the token's PKCS#11 library)",
            module.display()
        );
    }
    let context = Pkcs11::new(module)
        .with_context(|| format!("cannot load the PKCS#11 library {}", module.display()))?;
    match context.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
        Ok(()) | Err(CkError::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => {}
        Err(e) => {
            return Err(e).with_context(|| format!("cannot initialise {}", module.display()));
        }
    }
    loaded.insert(module.to_owned(), context.clone());
    Ok(context)
}

impl TokenVault {
    /// Opens the token named in `settings` and logs in: fails, saying which, when the
    /// library, the token or the PIN is wrong.
    pub fn open(settings: &TokenSettings) -> anyhow::Result<Self> {
        let context = library(&settings.module)?;
        let slot = find_token(&context, &settings.token_label)?;
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
        Ok(Self {
            context,
            slot,
            label: settings.token_label.clone(),
            idle: Mutex::default(),
            sessions: settings.sessions.max(1),
            _login: Mutex::new(login),
        })
    }

    /// Runs `work` with a session of the pool, opened when none is idle; a session whose
    /// work failed is closed rather than kept.
    fn with_session<T>(
        &self,
        work: impl FnOnce(&Session) -> cryptoki::error::Result<T>,
    ) -> anyhow::Result<T> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let session = match idle {
            Some(session) => session,
            None => self
                .context
                .open_rw_session(self.slot)
                .with_context(|| format!("cannot open a session with token {}", self.label))?,
        };
        let done = work(&session);
        if done.is_ok() {
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
            if idle.len() < self.sessions {
                idle.push(session);
            }
        }
        done.with_context(|| format!("token {}", self.label))
    }

    /// The private key object labelled `label`.
    fn private_key(&self, label: &str) -> anyhow::Result<ObjectHandle> {
        let found = self.with_session(|s| {
            s.find_objects(&[
                Attribute::Class(ObjectClass::PRIVATE_KEY),
                Attribute::Label(label.as_bytes().to_vec()),
            ])
        })?;
        match found.as_slice() {
            [one] => Ok(*one),
            [] => bail!(
                "token {} holds no private key labelled {label}: the signing key it names \
                 is missing",
                self.label
            ),
            _ => bail!(
                "token {} holds {} private keys labelled {label}",
                self.label,
                found.len()
            ),
        }
    }
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

/// A key of the token: its private key object and the vault its sessions come from.
struct TokenKey {
    vault: Arc<TokenVault>,
    handle: ObjectHandle,
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
            TokenAlgorithm::Es256 => {
                let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, message);
                return self
                    .vault
                    .with_session(|s| s.sign(&Mechanism::Ecdsa, self.handle, digest.as_ref()));
            }
        };
        self.vault
            .with_session(|s| s.sign(&mechanism, self.handle, message))
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
        let handle = self.0.private_key(name)?;
        Ok(Arc::new(TokenKey {
            vault: self.0.clone(),
            handle,
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

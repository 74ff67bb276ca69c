//! The mapping from webpki's errors to the outcome codes of pkie-verify/1
//! (docs/formats.md, "Verifier helper protocol"), so that its verdicts can be
//! compared with the other back ends'.

use webpki::Error;

/// The protocol code for a verification that failed with `err`.
///
/// webpki reports the most specific error over all the paths it tried (its
/// own ranking), so the code describes the best candidate path, not
/// necessarily the first one.
#[allow(deprecated)] // the deprecated variants can still be returned by 0.103
pub fn code_for(err: &Error) -> &'static str {
    match err {
        Error::CertExpired { .. } => "expired",
        Error::CertNotValidYet { .. } => "not_yet_valid",
        Error::UnknownIssuer => "unknown_issuer",

        Error::InvalidSignatureForPublicKey
        | Error::InvalidCrlSignatureForPublicKey
        // The signature algorithm in the certificate differs from the one
        // in its signed part: the signature cannot be accepted as made.
        | Error::SignatureAlgorithmMismatch => "bad_signature",

        Error::CertNotValidForName(_) => "name_mismatch",
        Error::NameConstraintViolation => "name_constraints",
        Error::PathLenConstraintViolated => "path_length",
        Error::CaUsedAsEndEntity | Error::EndEntityUsedAsCa => "not_ca",

        Error::RequiredEkuNotFound
        | Error::RequiredEkuNotFoundContext(_)
        // An EKU extension listing nothing allows no purpose at all.
        | Error::EmptyEkuExtension => "bad_usage",

        Error::BadDer
        | Error::BadDerTime
        | Error::TrailingData(_)
        | Error::MalformedExtensions
        | Error::MalformedDnsIdentifier
        | Error::MalformedNameConstraint
        | Error::ExtensionValueInvalid
        | Error::InvalidCertValidity
        | Error::InvalidSerialNumber
        | Error::InvalidNetworkMaskConstraint => "malformed",

        Error::UnsupportedCertVersion
        | Error::UnsupportedCriticalExtension
        | Error::UnsupportedNameType
        | Error::UnsupportedSignatureAlgorithm
        | Error::UnsupportedSignatureAlgorithmContext(_)
        | Error::UnsupportedSignatureAlgorithmForPublicKey
        | Error::UnsupportedSignatureAlgorithmForPublicKeyContext(_) => "unsupported",

        Error::MaximumPathDepthExceeded
        | Error::MaximumPathBuildCallsExceeded
        | Error::MaximumSignatureChecksExceeded
        | Error::MaximumNameConstraintComparisonsExceeded => "limits",

        // CertDistrusted (webpki's own distrust list), the revocation and
        // CRL errors (the helper passes no revocation options) and variants
        // added after 0.103.17 (the enum is non_exhaustive).
        _ => "other",
    }
}

//! The mapping from webpki's errors to the outcome codes of pkie-verify/1
//! (docs/formats/notary-and-tools.md, "Verifier helper protocol"), so that its verdicts can be
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

#[cfg(test)]
mod tests {
    use super::code_for;
    use rustls_pki_types::{ServerName, UnixTime};
    use webpki::{
        DerTypeId, Error, InvalidNameContext, KeyUsage, RequiredEkuNotFoundContext,
        UnsupportedSignatureAlgorithmContext, UnsupportedSignatureAlgorithmForPublicKeyContext,
    };

    #[test]
    #[allow(deprecated)]
    fn every_variant_has_its_code() {
        let t = UnixTime::since_unix_epoch(core::time::Duration::from_secs(1));
        let alg = || UnsupportedSignatureAlgorithmContext {
            signature_algorithm_id: vec![1],
            supported_algorithms: vec![],
        };
        let alg_key = || UnsupportedSignatureAlgorithmForPublicKeyContext {
            signature_algorithm_id: vec![1],
            public_key_algorithm_id: vec![2],
        };
        let cases: Vec<(Error, &str)> = vec![
            (
                Error::CertExpired {
                    time: t,
                    not_after: t,
                },
                "expired",
            ),
            (
                Error::CertNotValidYet {
                    time: t,
                    not_before: t,
                },
                "not_yet_valid",
            ),
            (Error::UnknownIssuer, "unknown_issuer"),
            (Error::InvalidSignatureForPublicKey, "bad_signature"),
            (Error::InvalidCrlSignatureForPublicKey, "bad_signature"),
            (Error::SignatureAlgorithmMismatch, "bad_signature"),
            (
                Error::CertNotValidForName(InvalidNameContext {
                    expected: ServerName::try_from("a.example").expect("name").to_owned(),
                    presented: vec![],
                }),
                "name_mismatch",
            ),
            (Error::NameConstraintViolation, "name_constraints"),
            (Error::PathLenConstraintViolated, "path_length"),
            (Error::CaUsedAsEndEntity, "not_ca"),
            (Error::EndEntityUsedAsCa, "not_ca"),
            (Error::RequiredEkuNotFound, "bad_usage"),
            (
                Error::RequiredEkuNotFoundContext(RequiredEkuNotFoundContext {
                    required: KeyUsage::server_auth(),
                    present: vec![],
                }),
                "bad_usage",
            ),
            (Error::EmptyEkuExtension, "bad_usage"),
            (Error::BadDer, "malformed"),
            (Error::BadDerTime, "malformed"),
            (Error::TrailingData(DerTypeId::Certificate), "malformed"),
            (Error::MalformedExtensions, "malformed"),
            (Error::MalformedDnsIdentifier, "malformed"),
            (Error::MalformedNameConstraint, "malformed"),
            (Error::ExtensionValueInvalid, "malformed"),
            (Error::InvalidCertValidity, "malformed"),
            (Error::InvalidSerialNumber, "malformed"),
            (Error::InvalidNetworkMaskConstraint, "malformed"),
            (Error::UnsupportedCertVersion, "unsupported"),
            (Error::UnsupportedCriticalExtension, "unsupported"),
            (Error::UnsupportedNameType, "unsupported"),
            (Error::UnsupportedSignatureAlgorithm, "unsupported"),
            (
                Error::UnsupportedSignatureAlgorithmContext(alg()),
                "unsupported",
            ),
            (
                Error::UnsupportedSignatureAlgorithmForPublicKey,
                "unsupported",
            ),
            (
                Error::UnsupportedSignatureAlgorithmForPublicKeyContext(alg_key()),
                "unsupported",
            ),
            (Error::MaximumPathDepthExceeded, "limits"),
            (Error::MaximumPathBuildCallsExceeded, "limits"),
            (Error::MaximumSignatureChecksExceeded, "limits"),
            (Error::MaximumNameConstraintComparisonsExceeded, "limits"),
            (Error::CertDistrusted, "other"),
            (Error::CertRevoked, "other"),
            (Error::UnknownRevocationStatus, "other"),
            (
                Error::CrlExpired {
                    time: t,
                    next_update: t,
                },
                "other",
            ),
            (Error::IssuerNotCrlSigner, "other"),
            (Error::UnsupportedCrlVersion, "other"),
            (
                Error::UnsupportedCrlSignatureAlgorithmContext(alg()),
                "other",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(code_for(&err), want, "{err:?}");
        }
    }
}

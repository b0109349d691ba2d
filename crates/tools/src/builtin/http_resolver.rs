//! The DNS resolver `http_get`'s client connects through: it drops every address that is not
//! public, so the check is made on the address actually connected to — for the first request,
//! every redirect, and a name whose records change between lookups (DNS rebinding).

use std::net::{IpAddr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::http_allowlist::is_public;

/// Resolves with the system resolver and keeps public addresses only.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PublicOnlyResolver;

/// A name that resolved to no public address.
#[derive(Debug, thiserror::Error)]
#[error(
    "host \"{host}\" resolves to {}, not a public address (loopback, private, link-local or \
     similar); allow-list the address itself or allow private addresses to reach it",
    list(.addresses)
)]
pub(crate) struct NonPublicAddress {
    /// The name looked up.
    pub host: String,
    /// What it resolved to.
    pub addresses: Vec<IpAddr>,
}

fn list(addresses: &[IpAddr]) -> String {
    if addresses.is_empty() {
        return "no address".to_string();
    }
    addresses
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Resolve for PublicOnlyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = resolved
                .iter()
                .copied()
                .filter(|addr| is_public(addr.ip()))
                .collect();
            if public.is_empty() {
                let mut addresses: Vec<IpAddr> = resolved.iter().map(SocketAddr::ip).collect();
                addresses.dedup();
                return Err(NonPublicAddress { host, addresses }.into());
            }
            let addrs: Addrs = Box::new(public.into_iter());
            Ok(addrs)
        })
    }
}

/// The [`NonPublicAddress`] somewhere in a request error's chain, if that is why it failed.
pub(crate) fn non_public_cause<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> Option<&'e NonPublicAddress> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(found) = e.downcast_ref::<NonPublicAddress>() {
            return Some(found);
        }
        current = e.source();
    }
    None
}

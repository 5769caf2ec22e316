//! The kubelet's pod-resources API: which pod and container each GPU (or MIG instance) is
//! assigned to, for the exporter's pod labels.
//!
//! The kubelet serves gRPC service `v1.PodResourcesLister` on the unix socket
//! `/var/lib/kubelet/pod-resources/kubelet.sock` (readable by root only, as a rule). Its
//! `List` call answers every pod on the node with, per container, the device ids each
//! device plugin allocated it. [`list`] makes that one call (HTTP/2 over the socket, the
//! messages in [`api`]); [`DeviceMap`] turns the answer into GPU assignments, with device
//! ids in every form NVIDIA's and GKE's device plugins give them ([`DeviceId`]); a
//! [`Poller`] keeps a current map off the caller's hot path.
//!
//! The join: a process belongs to the pod its GPU (or, on a MIG GPU, its GPU instance) is
//! assigned to. The pod uid a process's cgroup names cannot be used: the pod-resources
//! API gives pods by namespace and name, never by uid. A device several containers share
//! (time-slicing, MPS: ids with a `::N` or `/vgpuN` suffix) names all of them, and a
//! process on it cannot be told apart from the device alone: [`DeviceMap::owners`]
//! returns them all and the caller decides.
//!
//! The runtime (tokio, one thread) lives only for the duration of each call, so a
//! program that never asks pays nothing.

#![warn(missing_docs)]

pub mod api;
mod call;
mod devices;
#[cfg(any(test, feature = "fake-server"))]
pub mod fake;
mod poller;

pub use call::{list, Error, DEFAULT_SOCKET, METHOD};
pub use devices::{Claim, Device, DeviceId, DeviceMap, MigDevice, Owner, NVIDIA_DRA_DRIVER};
pub use poller::{Poller, State};

//! One worker cluster as the dispatcher holds it: its kubeconfig judged (`credentials`) and
//! followed as it changes (`credential_source`), the link to it (`link`: its client, copies,
//! reach; `supervise`: the connection kept from each accepted kubeconfig), the copies there
//! that must go (`fence`), the view of its namespaces (`namespace_labels`), and its room: its
//! Nodes and unfinished pods watched (`room_watch`) into a view (`view`).

pub mod credential_source;
pub mod credentials;
pub mod fence;
pub mod link;
pub mod namespace_labels;
pub mod room_watch;
mod supervise;
pub mod view;

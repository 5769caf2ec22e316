//! `cargo run -p gpupeek-kube --example list [SOCKET]`: what the kubelet's pod-resources
//! API says each NVIDIA device is assigned to, one line per device id.

fn main() {
    let socket = std::env::args()
        .nth(1)
        .unwrap_or_else(|| gpupeek_kube::DEFAULT_SOCKET.to_owned());
    match gpupeek_kube::list(socket.as_ref(), std::time::Duration::from_secs(2)) {
        Ok(response) => {
            for pod in &response.pod_resources {
                for c in &pod.containers {
                    for d in &c.devices {
                        for id in &d.device_ids {
                            let parsed = gpupeek_kube::DeviceId::parse(id);
                            println!(
                                "{}/{}/{} {} {id} {parsed:?}",
                                pod.namespace, pod.name, c.name, d.resource_name
                            );
                        }
                    }
                }
            }
        }
        Err(e) => {
            eprintln!("list: {socket}: {e}");
            std::process::exit(1);
        }
    }
}

//! The messages of `v1.PodResourcesLister/List`, as the kubelet's
//! `k8s.io/kubelet/pkg/apis/podresources/v1/api.proto` declares them: only the fields
//! gpupeek reads, with the proto's field numbers (protobuf decoding skips the others —
//! CPU ids, memory, topology, CDI device names). Written as prost derives rather than
//! generated, so that building needs no `protoc`.

/// `ListPodResourcesRequest`: empty.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesRequest {}

/// `ListPodResourcesResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ListPodResourcesResponse {
    /// `pod_resources = 1`.
    #[prost(message, repeated, tag = "1")]
    pub pod_resources: Vec<PodResources>,
}

/// `PodResources`: one pod.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodResources {
    /// `name = 1`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `namespace = 2`.
    #[prost(string, tag = "2")]
    pub namespace: String,
    /// `containers = 3`.
    #[prost(message, repeated, tag = "3")]
    pub containers: Vec<ContainerResources>,
}

/// `ContainerResources`: one container of a pod.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerResources {
    /// `name = 1`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `devices = 2`.
    #[prost(message, repeated, tag = "2")]
    pub devices: Vec<ContainerDevices>,
    /// `dynamic_resources = 5`: the devices of the resource claims (DRA) the container
    /// uses (kubelet 1.27+; the device names of [`ClaimResource`] since 1.31).
    #[prost(message, repeated, tag = "5")]
    pub dynamic_resources: Vec<DynamicResource>,
}

/// `DynamicResource`: one resource claim of a container (field 1, `class_name`, is gone
/// since 1.31).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DynamicResource {
    /// `claim_name = 2`.
    #[prost(string, tag = "2")]
    pub claim_name: String,
    /// `claim_namespace = 3`.
    #[prost(string, tag = "3")]
    pub claim_namespace: String,
    /// `claim_resources = 4`: the devices allocated to the claim.
    #[prost(message, repeated, tag = "4")]
    pub claim_resources: Vec<ClaimResource>,
}

/// `ClaimResource`: one device of a claim, as its DRA driver published it in its
/// ResourceSlice (`cdi_devices = 1` is skipped).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ClaimResource {
    /// `driver_name = 2`, e.g. `gpu.nvidia.com`.
    #[prost(string, tag = "2")]
    pub driver_name: String,
    /// `pool_name = 3`: the node's name, for NVIDIA's driver.
    #[prost(string, tag = "3")]
    pub pool_name: String,
    /// `device_name = 4`, e.g. `gpu-0` or `gpu-0-mig-1g10gb-19-3`.
    #[prost(string, tag = "4")]
    pub device_name: String,
    /// `share_id = 5`: set where the device's capacity is shared between claims.
    #[prost(string, optional, tag = "5")]
    pub share_id: Option<String>,
}

/// `ContainerDevices`: the devices of one resource allocated to a container.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerDevices {
    /// `resource_name = 1`, e.g. `nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`.
    #[prost(string, tag = "1")]
    pub resource_name: String,
    /// `device_ids = 2`, as the device plugin names them.
    #[prost(string, repeated, tag = "2")]
    pub device_ids: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// Bytes as the kubelet's Go encoder writes a pod with one GPU, with fields gpupeek
    /// does not declare (`cpu_ids = 3` of the container, `topology = 3` of the devices)
    /// between them: hand-assembled from the wire format.
    /// The answer for one pod, `ml/job`, with `container` (its wire bytes).
    fn in_a_pod(container: &[u8]) -> ListPodResourcesResponse {
        let pod = [
            &[0x0a, 3][..],
            b"job",
            &[0x12, 2],
            b"ml",
            &[0x1a, container.len() as u8],
            container,
        ]
        .concat();
        let bytes = [&[0x0a, pod.len() as u8][..], &pod].concat();
        ListPodResourcesResponse::decode(&bytes[..]).unwrap()
    }

    #[test]
    fn undeclared_fields_are_skipped() {
        let devices = [
            &[0x0a, 14][..],
            b"nvidia.com/gpu",
            &[0x12, 4],
            b"GPU0",
            &[0x1a, 4, 0x0a, 2, 0x08, 1], // topology { nodes { ID: 1 } }
        ]
        .concat();
        let container = [
            &[0x0a, 4][..],
            b"main",
            &[0x12, devices.len() as u8],
            &devices,
            &[0x1a, 2, 0x02, 0x03], // cpu_ids, packed
        ]
        .concat();
        let decoded = in_a_pod(&container);
        let pod = &decoded.pod_resources[0];
        assert_eq!((pod.name.as_str(), pod.namespace.as_str()), ("job", "ml"));
        let c = &pod.containers[0];
        assert_eq!(c.name, "main");
        assert_eq!(c.devices[0].resource_name, "nvidia.com/gpu");
        assert_eq!(c.devices[0].device_ids, ["GPU0"]);
    }

    /// A container's resource claim as the kubelet writes it: the claim's device with its
    /// CDI device first (not declared, skipped), then its driver, pool and device names.
    #[test]
    fn dynamic_resources_are_read() {
        let cdi = [&[0x0a, 9][..], b"k8s.gpu/x"].concat();
        let resource = [
            &[0x0a, cdi.len() as u8][..],
            &cdi,
            &[0x12, 14],
            b"gpu.nvidia.com",
            &[0x1a, 6],
            b"node-1",
            &[0x22, 5],
            b"gpu-2",
        ]
        .concat();
        let claim = [
            &[0x12, 5][..],
            b"claim",
            &[0x1a, 2],
            b"ml",
            &[0x22, resource.len() as u8],
            &resource,
        ]
        .concat();
        let container = [&[0x0a, 1][..], b"c", &[0x2a, claim.len() as u8], &claim].concat();
        let decoded = in_a_pod(&container);
        let claims = &decoded.pod_resources[0].containers[0].dynamic_resources;
        assert_eq!(
            claims,
            &[DynamicResource {
                claim_name: "claim".into(),
                claim_namespace: "ml".into(),
                claim_resources: vec![ClaimResource {
                    driver_name: "gpu.nvidia.com".into(),
                    pool_name: "node-1".into(),
                    device_name: "gpu-2".into(),
                    share_id: None,
                }],
            }]
        );
    }
}

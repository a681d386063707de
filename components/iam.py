"""IAM for a region's cluster: trust policies and the managed policies each role gets.

Pure data; `InferenceCluster` creates the roles and one `RolePolicyAttachment` per ARN.
"""

from __future__ import annotations

import json

CLUSTER_POLICIES = ("AmazonEKSClusterPolicy",)
"""The control plane's role: what EKS itself needs to run the cluster, nothing more."""

NODE_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
)
"""Every node's role (system and GPU pools), least privilege: join the cluster (WorkerNode)
and pull images from ECR (PullOnly, as Karpenter's CloudFormation template gives its nodes:
the pull actions and BatchImportUpstreamImage, not ReadOnly's listing and describing of every
repository).

AmazonEKS_CNI_Policy is not on the node role: the VPC CNI (the aws-node DaemonSet) gets it
through its own EKS Pod Identity association on the managed add-on (`CNI_POLICIES`), as the
EKS user guide recommends ("We recommend that you assign it to a separate role ... remove
the policy from your node role"), so no pod that reaches the instance role inherits the right
to manage the node's network interfaces.

AmazonSSMManagedInstanceCore is deliberately absent: it would let anyone with SSM access
open a shell on a GPU node (and read the model weights and the node's credentials) outside
Kubernetes RBAC and audit logs, and nothing in the fleet needs it; debug through
`kubectl debug node/...` instead, or attach it by hand for a break-glass session.
"""


CNI_POLICIES = ("AmazonEKS_CNI_Policy",)
"""The VPC CNI's own role (service account kube-system/aws-node, Pod Identity; the add-on
supports it from v1.15.5-eksbuild.1, EKS user guide add-ons-iam)."""


def partition(region: str) -> str:
    """The AWS partition of a region: aws, aws-cn or aws-us-gov."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def managed_policy_arn(name: str, region: str) -> str:
    return f"arn:{partition(region)}:iam::aws:policy/{name}"


def assume_role_policy(service: str, region: str) -> str:
    """Trust policy letting one AWS service principal (e.g. "eks", "ec2") assume a role."""
    suffix = "amazonaws.com.cn" if partition(region) == "aws-cn" else "amazonaws.com"
    doc = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": f"{service}.{suffix}"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    return json.dumps(doc, sort_keys=True)


POD_IDENTITY_PRINCIPAL = "pods.eks.amazonaws.com"


def tls_only_statement(bucket_arn: str) -> dict[str, object]:
    """A bucket policy statement refusing every request to the bucket not made over TLS."""
    return {
        "Sid": "TlsOnly",
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:*",
        "Resource": [bucket_arn, f"{bucket_arn}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }


def pod_identity_trust() -> str:
    """Trust policy of a role that EKS Pod Identity hands to a service account (EKS user
    guide, pod-id-role): AssumeRole and TagSession for the Pod Identity principal."""
    doc = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
            }
        ],
    }
    return json.dumps(doc, sort_keys=True)

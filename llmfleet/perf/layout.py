"""Where a replica's ranks land: TP x PP x DP GPUs on whole nodes of one instance type, the
link between those nodes (catalog.network), and why a layout cannot run.

Ranks fill a node TP first, then pipeline stages or data-parallel ranks: TP 8 x PP 2 puts
one stage on each of two 8-GPU nodes (the hops cross EFA), TP 16 puts every all-reduce on
EFA, DP 16 with EP puts the experts' all-to-all on EFA. A replica smaller than a node shares
it with others (the node's GPUs must divide evenly among them); a bigger one takes whole
nodes, and only where catalog.network allows it (EFA with GPUDirect RDMA and a measured
collective)."""

from __future__ import annotations

from llmfleet.catalog import network
from llmfleet.catalog.hardware import Instance
from llmfleet.perf.architecture import Arch, tp_problem
from llmfleet.perf.parallel import SINGLE, InterNode, Link, Parallel, efa_link, tcp_link


def layout_problem(
    arch: Arch, instance: Instance, tp: int, pp: int = 1, dp: int = 1, ep: bool = False
) -> tuple[str, str] | None:
    """(the flag's field, why) when this layout cannot run on nodes of `instance`, or None.
    Fields are PredictRequest's (tensor_parallel_size, pipeline_parallel_size,
    data_parallel_size, enable_expert_parallel)."""
    if ep and not arch.is_moe:
        return (
            "enable_expert_parallel",
            f"{arch.name} is a dense model: expert parallelism spreads routed experts, and it "
            "has none; leave expert parallelism off",
        )
    if dp > 1 and arch.is_moe and not ep:
        return (
            "data_parallel_size",
            f"data parallelism of the MoE model {arch.name} is modeled with expert "
            "parallelism (vLLM --enable-expert-parallel); without it vLLM shards the experts "
            "by TP across DP x TP ranks, which llmfleet does not model",
        )
    split = tp_problem(arch, tp)
    if split:
        return ("tensor_parallel_size", split)
    if pp > arch.layers:
        return ("pipeline_parallel_size", f"PP {pp} exceeds the model's {arch.layers} layers")
    gpn, ranks = instance.gpu_count, tp * pp * dp
    if ranks <= gpn:
        if gpn % ranks:
            field = _widest(tp, pp, dp)
            others = ranks // _size(field, tp, pp, dp)
            fits = [d for d in range(1, gpn + 1) if gpn % (others * d) == 0]
            return (
                field,
                f"TP {tp} x PP {pp} x DP {dp} = {ranks} GPUs do not divide the {gpn} GPUs of "
                f"a {instance.instance_type} node evenly; {LABELS[field]} that would: "
                f"{', '.join(map(str, fits))}",
            )
        return None
    field = _widest(tp, pp, dp)
    if network.multi_node_row(instance) is None:
        capable = ", ".join(network.multi_node_instances())
        return (
            field,
            f"TP {tp} x PP {pp} x DP {dp} = {ranks} GPUs span nodes, and "
            f"{network.why_single_node(instance)}: a replica spans nodes only over EFA with "
            f"GPUDirect RDMA ({capable}); keep TP x PP x DP within {gpn}",
        )
    if ranks % gpn:
        return (
            field,
            f"TP {tp} x PP {pp} x DP {dp} = {ranks} GPUs do not fill whole {gpn}-GPU nodes",
        )
    if tp > gpn and tp % gpn:
        return ("tensor_parallel_size", f"TP {tp} across nodes must be a multiple of {gpn}")
    if tp <= gpn and gpn % tp:
        return ("tensor_parallel_size", f"TP {tp} does not divide a {gpn}-GPU node")
    return None


LABELS = {
    "tensor_parallel_size": "TP",
    "pipeline_parallel_size": "PP",
    "data_parallel_size": "DP",
}


def _size(field: str, tp: int, pp: int, dp: int) -> int:
    return {"tensor_parallel_size": tp, "pipeline_parallel_size": pp}.get(field, dp)


def _widest(tp: int, pp: int, dp: int) -> str:
    """The flag a layout that does not fit is blamed on: DP, then PP, then TP."""
    if dp > 1:
        return "data_parallel_size"
    if pp > 1:
        return "pipeline_parallel_size"
    return "tensor_parallel_size"


def parallel_for(
    instance: Instance, tp: int, pp: int = 1, dp: int = 1, ep: bool = False,
    inter_node: InterNode = "efa",
) -> Parallel:
    """The Parallel of a layout on nodes of `instance` (checked by `layout_problem`): the
    link between its nodes where the replica spans more than one, EFA's measured collective,
    or NCCL's TCP sockets on the primary ENA interface (`inter_node` "tcp": a serving image
    without the EFA plugin)."""
    if pp == 1 and dp == 1 and not ep and tp <= instance.gpu_count:
        return SINGLE
    link = None
    if tp * pp * dp > instance.gpu_count:
        link = node_link(instance, inter_node)
    return Parallel(pp=pp, dp=dp, ep=ep, gpus_per_node=instance.gpu_count, inter_node=link)


def node_link(instance: Instance, inter_node: InterNode) -> Link:
    """What crosses between two nodes of `instance`: EFA (its measured two-node all-reduce)
    or TCP sockets (catalog/tcp.csv)."""
    if inter_node == "tcp":
        tcp = network.tcp(instance.instance_type)
        assert tcp is not None, f"no TCP row for {instance.instance_type} (catalog/tcp.csv)"
        return tcp_link(tcp.latency_us, tcp.allreduce_busbw_gb_s, tcp.p2p_gb_s_per_gpu)
    row = network.multi_node_row(instance)
    assert row is not None and row.collective_latency_us is not None
    assert row.collective_busbw_gb_s is not None
    curve = network.allreduce_curve(row.measured_on or row.instance_type)
    return efa_link(row.collective_latency_us, row.collective_busbw_gb_s, row.gb_s_per_gpu, curve)

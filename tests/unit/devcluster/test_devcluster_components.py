"""Every control-plane process listens on loopback only, on the ports chosen for its cluster."""

from __future__ import annotations

from pathlib import Path

from horus_operator.devcluster import components

BIN = Path("/bin-dir")


def all_argvs(layout: components.Layout, ports: components.Ports) -> dict[str, list[str]]:
    return {
        "etcd": components.etcd_argv(BIN / "etcd", layout, ports),
        "kube-apiserver": components.apiserver_argv(BIN / "kube-apiserver", layout, ports),
        "kube-controller-manager": components.controller_manager_argv(BIN / "kcm", layout, ports),
        "kube-scheduler": components.scheduler_argv(BIN / "kube-scheduler", layout, ports),
        "kwok": components.kwok_argv(BIN / "kwok", layout, [Path("/stages/a.yaml"), Path("/stages/b.yaml")]),
    }


def flag_values(argv: list[str], *names: str) -> list[str]:
    return [arg.split("=", 1)[1] for arg in argv if arg.split("=", 1)[0] in names]


def test_free_ports_are_distinct() -> None:
    ports = components.Ports.free().as_dict().values()
    assert len(set(ports)) == len(ports)


def test_free_ports_stay_below_the_ephemeral_range() -> None:
    # A component restarted later must find its port free again: no outgoing connection takes it.
    low, high = components.PORT_RANGE
    assert high <= 32768
    assert all(low <= port < high for port in components.Ports.free().as_dict().values())


def test_every_address_flag_is_loopback_with_the_chosen_port(tmp_path: Path) -> None:
    ports = components.Ports(2379, 2380, 6443, 10257, 10259)
    argvs = all_argvs(components.Layout(tmp_path), ports)

    assert (
        flag_values(argvs["etcd"], "--listen-client-urls", "--advertise-client-urls")
        == ["http://127.0.0.1:2379"] * 2
    )
    assert flag_values(argvs["etcd"], "--listen-peer-urls") == ["http://127.0.0.1:2380"]
    assert flag_values(argvs["kube-apiserver"], "--etcd-servers") == ["http://127.0.0.1:2379"]
    for name, port in (
        ("kube-apiserver", 6443),
        ("kube-controller-manager", 10257),
        ("kube-scheduler", 10259),
    ):
        assert flag_values(argvs[name], "--bind-address") == ["127.0.0.1"], name
        assert flag_values(argvs[name], "--secure-port") == [str(port)], name


def test_components_reach_the_apiserver_through_the_state_dir_kubeconfig(tmp_path: Path) -> None:
    layout = components.Layout(tmp_path)
    argvs = all_argvs(layout, components.Ports(1, 2, 3, 4, 5))
    for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
        assert flag_values(argvs[name], "--kubeconfig") == [str(tmp_path / "kubeconfig")], name


def test_garbage_collector_runs_and_kwok_gets_every_stage_file(tmp_path: Path) -> None:
    argvs = all_argvs(components.Layout(tmp_path), components.Ports(1, 2, 3, 4, 5))
    controllers = flag_values(argvs["kube-controller-manager"], "--controllers")[0].split(",")
    assert "garbage-collector-controller" in controllers
    assert flag_values(argvs["kwok"], "--config") == ["/stages/a.yaml", "/stages/b.yaml"]


def test_kube_schedulers_client_rate_is_its_own_default_unless_asked(tmp_path: Path) -> None:
    layout, ports = components.Layout(tmp_path), components.Ports(2379, 2380, 6443, 10257, 10259)
    default = components.scheduler_argv(BIN / "kube-scheduler", layout, ports)
    assert not flag_values(default, "--kube-api-qps", "--kube-api-burst")
    raised = components.scheduler_argv(BIN / "kube-scheduler", layout, ports, api_qps=200)
    assert flag_values(raised, "--kube-api-qps", "--kube-api-burst") == ["200", "400"]

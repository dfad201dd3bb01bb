import pytest

from horus_operator.prediction.measured import TruthTable, Unmeasured

A, B, C = ("v100", "a", 32), ("v100", "b", 64), ("v100", "c", 8)


def table() -> TruthTable:
    return TruthTable(
        isolated={A: 10.0, B: 4.0, C: 1.0},
        pairs={(A, B): (1.5, 2.0), (B, A): (2.0, 1.5), (A, C): None, (C, A): None},
    )


def test_reads_the_colocation_csv_in_both_orders_and_zero_shared_throughput_as_cannot_share(tmp_path) -> None:
    path = tmp_path / "pairs.csv"
    path.write_text(
        "gpu,model_a,batch_a,model_b,batch_b,tput_a_alone,tput_b_alone,tput_a_shared,tput_b_shared\n"
        "v100,a,32,b,64,10,4,5,2\n"
        "v100,a,32,c,8,10,1,0,0\n"
    )

    loaded = TruthTable.from_csv(path)

    assert loaded.pairs[(B, A)] == (2.0, 2.0)
    assert loaded.pairs[(A, C)] is None
    assert loaded.configs("v100") == [("a", 32), ("b", 64), ("c", 8)]


def test_slowdowns_of_a_measured_pair_follow_the_order_asked() -> None:
    assert table().slowdowns("v100", [("b", 64), ("a", 32)]) == (2.0, 1.5)
    assert table().slowdowns("v100", [("a", 32)]) == (1.0,)


def test_a_pair_measured_unable_to_share_is_none_and_an_unmeasured_one_raises() -> None:
    assert table().slowdowns("v100", [("a", 32), ("c", 8)]) is None
    with pytest.raises(Unmeasured):
        table().slowdowns("v100", [("b", 64), ("c", 8)])
    with pytest.raises(Unmeasured):
        table().slowdowns("p100", [("a", 32), ("b", 64)])


def test_more_than_two_jobs_add_their_pairwise_excess() -> None:
    three = TruthTable(
        isolated={},
        pairs={
            (A, B): (1.5, 2.0), (B, A): (2.0, 1.5),
            (A, A): (1.2, 1.2),
        },
    )  # fmt: skip

    assert three.slowdowns("v100", [("a", 32), ("a", 32), ("b", 64)]) == pytest.approx((1.7, 1.7, 3.0))

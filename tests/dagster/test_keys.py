"""Dataset-key mapping and escaping (pure functions, no Dagster run)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dagster_parquet_dataset.dagster_io.keys import (
    asset_dataset_key,
    escape_segment,
    normalize_prefix,
    op_output_dataset_key,
    partition_values,
    unescape_segment,
)
from dagster_parquet_dataset.storage.base import validate_key


def test_asset_keys_follow_the_design_mapping() -> None:
    assert asset_dataset_key("", ["a", "b"]) == "a/b"
    assert asset_dataset_key("", ["a", "b"], ["p"]) == "a/b/p"
    assert asset_dataset_key("warehouse/prod", ["a"], ["2024-01-01"]) == "warehouse/prod/a/2024-01-01"
    # multi-dimension: values in the order of the sorted dimension names, whatever the dict order
    values = partition_values("us|2024-01-01", {"region": "us", "date": "2024-01-01"})
    assert values == ["2024-01-01", "us"]
    assert asset_dataset_key("", ["a", "b"], values) == "a/b/2024-01-01/us"
    assert op_output_dataset_key("", ["run-1", "my_op", "result"]) == "run-1/my_op/result"
    assert op_output_dataset_key("pre", ["run-1", "my_op[k]", "result", "k"]) == "pre/run-1/my_op[k]/result/k"


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("../x", "..%2Fx"),
        ("a/b", "a%2Fb"),
        ("..", "%2E%2E"),
        (".", "%2E"),
        ("", "%"),
        ("x\\y", "x%5Cy"),
        ("nul\x00", "nul%00"),
        ("50%", "50%25"),
        ("%2F", "%252F"),
        ("2024-01-01", "2024-01-01"),
        ("red|2024", "red|2024"),
        ("..x", "..x"),
        ("_versions", "%5Fversions"),
        ("_segments", "%5Fsegments"),
        ("_delta_log", "%5Fdelta_log"),
        ("_delta_manifests", "%5Fdelta_manifests"),
        ("manifest.json", "%6Danifest.json"),
        ("_SUCCESS", "%5FSUCCESS"),
        ("_claim", "%5Fclaim"),
        ("_spark_staging-7", "%5Fspark_staging-7"),
        (".m.lock", "%2Em.lock"),
        (".a/b.tmp", "%2Ea%2Fb.tmp"),
        ("_versions2", "_versions2"),
        ("x_segments", "x_segments"),
    ],
)
def test_escape_keeps_every_value_inside_one_folder(value: str, escaped: str) -> None:
    assert escape_segment(value) == escaped
    assert unescape_segment(escaped) == value
    key = asset_dataset_key("", ["events"], [value])
    assert validate_key(key) == key
    assert key.split("/") == ["events", escaped]


@given(st.text())
def test_escape_is_one_safe_segment_and_reversible(value: str) -> None:
    segment = escape_segment(value)
    assert "/" not in segment
    assert validate_key(segment) == segment
    assert unescape_segment(segment) == value


@given(st.text(), st.text())
def test_distinct_values_never_share_a_folder(a: str, b: str) -> None:
    if a != b:
        assert escape_segment(a) != escape_segment(b)


def test_unescape_rejects_what_escape_never_produces() -> None:
    with pytest.raises(ValueError, match="bad escape"):
        unescape_segment("a%2Eb")
    with pytest.raises(ValueError, match="bad escape"):
        unescape_segment("%5Fdata")  # "_data" is not reserved: it is never escaped


@pytest.mark.parametrize("prefix", ["../up", "a//b", "a/./b", "x\\y"])
def test_unsafe_prefix_is_rejected_with_its_name(prefix: str) -> None:
    with pytest.raises(ValueError, match="prefix"):
        normalize_prefix(prefix)


def test_prefix_slashes_are_trimmed() -> None:
    assert normalize_prefix("/warehouse/prod/") == "warehouse/prod"
    assert normalize_prefix("") == ""

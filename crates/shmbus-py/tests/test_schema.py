"""Channel schemas from Python on every kind: `Schema` values, the `schema=` keyword of
`create_or_open`, each channel's `.schema`, `SchemaMismatch` for another schema (or one asked
of a channel without), none accepting any, the 1 MiB limit and one byte over, and a child
process that opens the channel with another schema."""

import subprocess
import sys
import textwrap

import pytest

import shmbus

IMU_TEXT = b"std_msgs/Header header\nfloat64[3] linear_acceleration\n"
IMU = shmbus.Schema("cdr", "sensor_msgs/msg/Imu", "ros2msg", IMU_TEXT)
IMAGE = shmbus.Schema("protobuf", "foxglove.RawImage", "protobuf", b"\x0a\x03abc")

KINDS = ["topic", "queue", "stream", "pool", "journal"]
MAX_DATA = 1 << 20  # bytes of schema data a schema may hold


def make(kind, domain, tmp_path, name, **kw):
    """Opens (or creates) channel `name` of `kind` with the keywords `kw` (a journal in a
    directory of that name)."""
    if kind == "journal":
        return shmbus.Journal.create_or_open(tmp_path / name, **kw)
    cls = {"topic": shmbus.Topic, "queue": shmbus.Queue, "stream": shmbus.Stream, "pool": shmbus.Pool}[kind]
    return cls.create_or_open(domain, name, **kw)


def reopen(kind, domain, tmp_path, name):
    if kind == "journal":
        return shmbus.Journal.open(tmp_path / name)
    cls = {"topic": shmbus.Topic, "queue": shmbus.Queue, "stream": shmbus.Stream, "pool": shmbus.Pool}[kind]
    return cls.open(domain, name)


def test_schema_values():
    assert (IMU.message_encoding, IMU.name, IMU.encoding, IMU.data) == (
        "cdr",
        "sensor_msgs/msg/Imu",
        "ros2msg",
        IMU_TEXT,
    )
    assert IMU == shmbus.Schema("cdr", "sensor_msgs/msg/Imu", "ros2msg", bytearray(IMU_TEXT))
    assert IMU != IMAGE and IMU != "cdr"
    assert hash(IMU) == hash(shmbus.Schema("cdr", "sensor_msgs/msg/Imu", "ros2msg", memoryview(IMU_TEXT)))
    assert repr(IMU) == 'Schema("cdr", name="sensor_msgs/msg/Imu", encoding="ros2msg", data=<54 bytes>)'
    assert str(IMU) == "cdr sensor_msgs/msg/Imu (ros2msg, 54 bytes)"
    plain = shmbus.Schema("json")
    assert (plain.name, plain.encoding, plain.data) == ("", "", b"")
    with pytest.raises(AttributeError):
        IMU.name = "x"  # a value: frozen


@pytest.mark.parametrize(
    "args, words",
    [
        (("",), "message encoding"),
        (("cdr", "two\nlines"), "control character"),
        (("cdr", "a" * 1025), "1025"),
        (("json", "", "", b"x"), "without a schema encoding"),
        (("protobuf", "big.M", "protobuf", bytes(MAX_DATA + 1)), str(MAX_DATA + 1)),
    ],
)
def test_invalid_schemas_raise_invalid_config(args, words):
    with pytest.raises(shmbus.InvalidConfig, match=words) as e:
        shmbus.Schema(*args)
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_stores_its_schema_and_checks_it_on_open(kind, domain, tmp_path):
    with make(kind, domain, tmp_path, "imu", schema=IMU) as ch:
        assert ch.schema == IMU
        assert reopen(kind, domain, tmp_path, "imu").schema == IMU
        # The same schema and none open it; another is refused, naming both.
        assert make(kind, domain, tmp_path, "imu", schema=IMU).schema == IMU
        assert make(kind, domain, tmp_path, "imu").schema == IMU
        with pytest.raises(shmbus.SchemaMismatch, match="foxglove.RawImage") as e:
            make(kind, domain, tmp_path, "imu", schema=IMAGE)
        assert "sensor_msgs/msg/Imu" in str(e.value)
        assert isinstance(e.value, shmbus.Error)

    # A channel without a schema: None, and asking for one is a mismatch.
    plain = make(kind, domain, tmp_path, "plain")
    assert plain.schema is None
    with pytest.raises(shmbus.SchemaMismatch, match="no schema"):
        make(kind, domain, tmp_path, "plain", schema=IMU)
    plain.close()
    with pytest.raises(shmbus.Closed):
        plain.schema


@pytest.mark.parametrize("kind", KINDS)
def test_schema_data_of_exactly_the_limit_is_stored(kind, domain, tmp_path):
    data = bytes((i * 7 + 3) & 0xFF for i in range(MAX_DATA))
    big = shmbus.Schema("protobuf", "big.Message", "protobuf", data)
    make(kind, domain, tmp_path, "big", schema=big)
    got = reopen(kind, domain, tmp_path, "big").schema
    assert got == big and got.data == data
    with pytest.raises(shmbus.InvalidConfig, match="1048577"):
        shmbus.Schema("protobuf", "big.Message", "protobuf", data + b"\0")


CHILD = textwrap.dedent(
    """
    import pathlib, sys
    import shmbus
    kind, root, name, where = sys.argv[1:]
    d = shmbus.Domain(name, root=root)
    other = shmbus.Schema("protobuf", "foxglove.RawImage", "protobuf", b"\\x0a\\x03abc")
    def open_with(**kw):
        if kind == "journal":
            return shmbus.Journal.create_or_open(pathlib.Path(where), **kw)
        cls = {"topic": shmbus.Topic, "queue": shmbus.Queue, "stream": shmbus.Stream, "pool": shmbus.Pool}[kind]
        return cls.create_or_open(d, where, **kw)
    try:
        open_with(schema=other)
    except shmbus.SchemaMismatch as e:
        print("mismatch:", e)
    s = open_with().schema
    print("seen:", s.message_encoding, s.name, s.encoding, len(s.data))
    """
)


@pytest.mark.parametrize("kind", KINDS)
def test_another_process_opening_with_another_schema_is_refused(kind, domain, tmp_path):
    ch = make(kind, domain, tmp_path, "shared", schema=IMU)
    where = str(tmp_path / "shared") if kind == "journal" else "shared"
    out = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(domain.root), domain.name, where],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("mismatch:") and "sensor_msgs/msg/Imu" in lines[0], out.stdout
    assert lines[1] == f"seen: cdr sensor_msgs/msg/Imu ros2msg {len(IMU_TEXT)}"
    assert ch.schema == IMU

from __future__ import annotations

from pathlib import Path

import pytest

from sensors.config import (
    ConfigError,
    Endpoint,
    Peer,
    load_config,
    parse_endpoint,
    parse_peer,
)

BASE = ["--server", "http://ppe:8000", "--token", "t0k"]


def test_defaults_match_the_documented_command() -> None:
    cfg = load_config(BASE + ["--name", "h1"], environ={})
    assert cfg.server == "http://ppe:8000"
    assert cfg.period == 10.0
    assert cfg.probe_size == 64 * 1024
    assert cfg.peers == ()
    assert cfg.listen is None
    assert cfg.cpu is True


def test_flags_parse_peers_listen_and_numbers() -> None:
    cfg = load_config(
        BASE
        + [
            "--name",
            "h1",
            "--period",
            "0.5",
            "--peers",
            "h2:7000,h3=10.0.0.3:7001",
            "--listen",
            "0.0.0.0:7000",
            "--spool",
            "/tmp/x",
            "--no-cpu",
            "--cpus",
            "0,2-3",
        ],
        environ={},
    )
    assert cfg.period == 0.5
    assert cfg.peers == (
        Peer(Endpoint("h2", 7000)),
        Peer(Endpoint("10.0.0.3", 7001), name="h3"),
    )
    assert cfg.listen == Endpoint("0.0.0.0", 7000)
    assert cfg.spool_dir == Path("/tmp/x")
    assert cfg.cpu is False
    assert cfg.cpus == frozenset({0, 2, 3})


def test_precedence_flag_over_env_over_file(tmp_path: Path) -> None:
    f = tmp_path / "sensor.toml"
    f.write_text(
        'server = "http://from-file:1"\ntoken = "file-token"\nname = "filehost"\n'
        'period = 30\npeers = ["a:1", "b=127.0.0.1:2"]\nbatch_size = 7\n'
    )
    env = {"PPE_SENSOR_PERIOD": "20", "PPE_SENSOR_NAME": "envhost"}
    cfg = load_config(["--config", str(f), "--name", "flaghost"], environ=env)
    assert cfg.name == "flaghost"  # flag beats env and file
    assert cfg.period == 20.0  # env beats file
    assert cfg.batch_size == 7  # file beats default
    assert cfg.server == "http://from-file:1"
    assert [str(p) for p in cfg.peers] == ["a:1", "b=127.0.0.1:2"]


def test_config_file_from_env_and_sensor_table(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text('[sensor]\nserver = "https://p"\ntoken = "x"\nname = "n1"\ncpus = 1\n')
    cfg = load_config([], environ={"PPE_SENSOR_CONFIG": str(f)})
    assert (cfg.server, cfg.name, cfg.cpus) == ("https://p", "n1", frozenset({1}))


def test_token_file(tmp_path: Path) -> None:
    tok = tmp_path / "token"
    tok.write_text("secret-token\n")
    cfg = load_config(["--server", "http://p", "--token-file", str(tok), "--name", "a"], environ={})
    assert cfg.token == "secret-token"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--token", "t"], "--server is required"),
        (["--server", "http://p"], "--token is required"),
        (BASE + ["--period", "0"], "--period"),
        (BASE + ["--period", "abc"], "--period"),
        (BASE + ["--name", "bad name"], "--name"),
        (BASE + ["--peers", "h2"], "--peers"),
        (BASE + ["--listen", "h:99999"], "--listen"),
        (["--server", "ppe:8000", "--token", "t"], "http"),
        (BASE + ["--backoff-initial", "10", "--backoff-max", "1"], "backoff"),
    ],
)
def test_bad_settings_name_the_setting(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(argv + (["--name", "h"] if "--name" not in argv else []), environ={})


def test_env_error_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="PPE_SENSOR_BATCH_SIZE"):
        load_config(BASE, environ={"PPE_SENSOR_BATCH_SIZE": "-3"})


def test_unknown_file_key_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text('server = "http://p"\ntoken = "x"\nperiood = 3\n')
    with pytest.raises(ConfigError, match="periood"):
        load_config(["--config", str(f)], environ={})


def test_endpoint_forms() -> None:
    assert parse_endpoint("[::1]:7000") == Endpoint("::1", 7000)
    assert parse_endpoint(":7000") == Endpoint("0.0.0.0", 7000)
    assert parse_endpoint("h", default_port=7000) == Endpoint("h", 7000)
    assert str(Endpoint("::1", 7)) == "[::1]:7"
    assert parse_peer("x=[::1]:9") == Peer(Endpoint("::1", 9), "x")
    with pytest.raises(ConfigError):
        parse_peer("bad name=h:1")


def test_profile_every_defaults_to_a_day_and_zero_turns_the_schedule_off() -> None:
    assert load_config(BASE, environ={}).profile_every == 86400.0
    assert load_config(BASE + ["--profile-every", "0"], environ={}).profile_every == 0.0
    env = {"PPE_SENSOR_PROFILE_EVERY": "3600"}
    assert load_config(BASE, environ=env).profile_every == 3600.0
    for bad in ("-1", "nan", "inf", "daily"):
        with pytest.raises(ConfigError, match="--profile-every"):
            load_config(BASE + ["--profile-every", bad], environ={})

"""Broker URLs and topic names: what an operator types on the command line."""

from __future__ import annotations

import pytest

from exporters.mqtt.topics import TopicError, Topics
from exporters.mqtt.url import BrokerUrlError, parse_broker_url


def test_defaults_stay_on_loopback() -> None:
    cfg = parse_broker_url("mqtt://")
    assert (cfg.host, cfg.port, cfg.tls, cfg.username) == ("127.0.0.1", 1883, False, None)


def test_user_password_and_tls_options() -> None:
    cfg = parse_broker_url("mqtts://ops:s%40cret@broker.example:8884?ca=/etc/ca.pem&keepalive=30")
    assert cfg.tls and cfg.port == 8884 and cfg.host == "broker.example"
    assert (cfg.username, cfg.password, cfg.ca_file, cfg.keepalive_s) == (
        "ops",
        "s@cret",
        "/etc/ca.pem",
        30,
    )
    assert "s@cret" not in cfg.display() and "s%40cret" not in cfg.display()
    assert parse_broker_url("mqtts://broker").port == 8883


def test_password_from_environment() -> None:
    cfg = parse_broker_url("mqtt://ops@h", environ={"FABTOP_MQTT_PASSWORD": "pw"})
    assert cfg.password == "pw"


def test_host_port_shorthand() -> None:
    cfg = parse_broker_url("10.0.0.5:1999")
    assert (cfg.host, cfg.port) == ("10.0.0.5", 1999)


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("http://h", "unknown scheme 'http'"),
        ("mqtt://h:99999", "bad broker URL"),
        ("mqtt://h:0", "port 0"),
        ("mqtt://h?colour=red", "unknown option 'colour'"),
        ("mqtt://h?ca=/x.pem", "TLS options need an mqtts:// URL"),
        ("mqtts://h?key=/k.pem", "option 'key' needs 'cert'"),
        ("mqtt://h?keepalive=soon", "keepalive must be whole seconds"),
        ("mqtt://h/demo", "unexpected path '/demo'"),
        ("mqtts://h?insecure=maybe", "must be true or false"),
    ],
)
def test_bad_urls_say_why(url: str, needle: str) -> None:
    with pytest.raises(BrokerUrlError, match=needle):
        parse_broker_url(url)


def test_missing_ca_file_is_a_clear_error() -> None:
    cfg = parse_broker_url("mqtts://h?ca=/nonexistent/ca.pem")
    with pytest.raises(BrokerUrlError, match="TLS setup failed"):
        cfg.tls_context()


def test_topics_layout() -> None:
    t = Topics("demo")
    assert t.status == "fabtop/demo/status"
    assert t.cmd("inject") == "fabtop/demo/cmd/inject"
    assert t.command_name("fabtop/demo/cmd/inject") == "inject"
    assert t.command_name("fabtop/demo/result/x") is None
    assert t.result("abc") == "fabtop/demo/result/abc"
    assert t.result(None) == "fabtop/demo/result"
    assert Topics.cluster_of("fabtop/demo/status") == "demo"


@pytest.mark.parametrize("name", ["", "a/b", "a+", "#", "with space", "x" * 65])
def test_cluster_names_that_cannot_be_a_topic_level(name: str) -> None:
    with pytest.raises(TopicError, match="cluster name"):
        Topics(name)

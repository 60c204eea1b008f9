"""nginx configuration, rewritten so that Debian's nginx can play an ``nginx:*`` container (pure).

A pod's nginx would have its own network namespace and filesystem; here it
shares the machine's. :func:`rewrite` turns the container's configuration into
one for this machine:

- every ``listen`` binds the pod's address (``listen 80`` -> ``listen POD_IP:80``;
  ``*``, ``0.0.0.0``, ``localhost`` and ``127.0.0.1`` likewise); IPv6 listens are
  dropped, and a ``server`` left without any listens the pod's port 80, because
  nginx would otherwise bind ``*:80``;
- ``include`` and file paths of a few directives (``root``, ``alias``, certificates, ...)
  go through callbacks, so that paths under volume mounts reach their host
  directories and included files are rewritten too;
- ``user root`` (the pod's files live in directories only root may enter),
  errors to stderr and access logs to stdout (as the image links them; also when
  the configuration names none, as nginx would write to a file on this machine), and no
  ``pid``, ``daemon`` (given on the command line) or ``resolver`` (there is no
  cluster DNS, and a resolver address could lie off this machine);
- temp paths inside the pod's own directory.

The configuration is parsed into directives (comments dropped) and written back
one directive per line. :data:`IMAGE_FILES` are the files of the official image
that Debian does not have at the same path (its ``nginx.conf`` and ``conf.d/default.conf``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

__all__ = ["IMAGE_FILES", "Directive", "listen_address", "parse", "render", "rewrite"]

IMAGE_FILES = {
    "/etc/nginx/nginx.conf": """
user  nginx;
worker_processes  auto;
error_log  /var/log/nginx/error.log notice;
pid        /var/run/nginx.pid;
events {
    worker_connections  1024;
}
http {
    include       /etc/nginx/mime.types;
    default_type  application/octet-stream;
    log_format  main  '$remote_addr - $remote_user [$time_local] "$request" '
                      '$status $body_bytes_sent "$http_referer" '
                      '"$http_user_agent" "$http_x_forwarded_for"';
    access_log  /var/log/nginx/access.log  main;
    sendfile        on;
    keepalive_timeout  65;
    include /etc/nginx/conf.d/*.conf;
}
""",
    "/etc/nginx/conf.d/default.conf": """
server {
    listen       80;
    listen  [::]:80;
    server_name  localhost;
    location / {
        root   /usr/share/nginx/html;
        index  index.html index.htm;
    }
    error_page   500 502 503 504  /50x.html;
    location = /50x.html {
        root   /usr/share/nginx/html;
    }
}
""",
}

TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
# Directives whose first argument is a file or directory path.
PATH_DIRECTIVES = frozenset(
    {
        "root", "alias", "load_module", "ssl_certificate", "ssl_certificate_key", "ssl_trusted_certificate",
        "ssl_client_certificate", "ssl_dhparam", "ssl_crl", "ssl_password_file", "auth_basic_user_file",
        "proxy_cache_path", "fastcgi_cache_path", "uwsgi_cache_path", "scgi_cache_path",
    }
)  # fmt: skip
DROPPED = frozenset({"pid", "daemon", "resolver", "user", *(f"{kind}_temp_path" for kind in TEMP_PATHS)})
_SPECIAL = re.compile(r"[\s;{}'\"#\\]")


@dataclass
class Directive:
    """One directive: its name, its arguments (unquoted) and, for a block, the directives inside."""

    name: str
    args: list[str] = field(default_factory=list)
    block: list[Directive] | None = None


_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "t": "\t", "r": "\r", "n": "\n"}


def _unescape(raw: str) -> str:
    """nginx's escapes: only ``\\"``, ``\\'``, ``\\\\``, ``\\t``, ``\\r``, ``\\n``; other backslashes stay."""
    out, i = [], 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw) and raw[i + 1] in _ESCAPES:
            out.append(_ESCAPES[raw[i + 1]])
            i += 2
        else:
            out.append(raw[i])
            i += 1
    return "".join(out)


def _tokens(text: str) -> Iterator[tuple[str, bool]]:
    """(token, quoted) pairs; ``;``, ``{`` and ``}`` are tokens of their own."""
    i, size = 0, len(text)
    while i < size:
        char = text[i]
        if char.isspace():
            i += 1
        elif char == "#":
            end = text.find("\n", i)
            i = size if end < 0 else end
        elif char in ";{}":
            yield char, False
            i += 1
        elif char in "\"'":
            start = i = i + 1
            while i < size and text[i] != char:
                i += 2 if text[i] == "\\" else 1
            yield _unescape(text[start:i]), True
            i += 1
        else:
            start = i
            while i < size and not text[i].isspace() and text[i] not in ";{}\"'":
                if text[i] == "\\":
                    i += 2
                elif text[i] == "$" and i + 1 < size and text[i + 1] == "{":  # ${var}: not a block
                    i = text.find("}", i) + 1 or size
                else:
                    i += 1
            yield _unescape(text[start:i]), False


def parse(text: str) -> list[Directive]:
    """The directives of a configuration file; raises ``ValueError`` on unbalanced braces."""
    stack: list[list[Directive]] = [[]]
    words: list[tuple[str, bool]] = []
    for word, quoted in _tokens(text):
        if not quoted and word == ";":
            if words:
                stack[-1].append(Directive(words[0][0], [w for w, _ in words[1:]]))
            words = []
        elif not quoted and word == "{":
            if not words:
                raise ValueError("a block without a directive name")
            directive = Directive(words[0][0], [w for w, _ in words[1:]], [])
            stack[-1].append(directive)
            assert directive.block is not None
            stack.append(directive.block)
            words = []
        elif not quoted and word == "}":
            if len(stack) == 1 or words:
                raise ValueError("unbalanced '}' in the nginx configuration")
            stack.pop()
        else:
            words.append((word, quoted))
    if len(stack) != 1 or words:
        raise ValueError("unterminated directive or block in the nginx configuration")
    return stack[0]


def _quote(word: str) -> str:
    if word and not _SPECIAL.search(word):
        return word
    return "'" + word.replace("\\", "\\\\").replace("'", "\\'") + "'"


def render(directives: list[Directive], indent: str = "") -> str:
    lines = []
    for directive in directives:
        head = " ".join([directive.name, *(_quote(a) for a in directive.args)])
        if directive.block is None:
            lines.append(f"{indent}{head};\n")
        else:
            lines.append(f"{indent}{head} {{\n{render(directive.block, indent + '    ')}{indent}}}\n")
    return "".join(lines)


def listen_address(argument: str, pod_ip: str, translate: Callable[[str], str]) -> str | None:
    """A ``listen`` address bound to the pod's address; None for one to drop (IPv6) (pure)."""
    if argument.startswith("unix:"):
        return "unix:" + translate(argument[len("unix:") :])
    if argument.startswith("["):
        return None
    host, _, port = argument.rpartition(":")
    if not host:
        port = argument
    if not port.isdigit():  # "listen localhost" or another name alone: port 80
        port = "80"
    return f"{pod_ip}:{port}"


def _rewrite_block(
    directives: list[Directive],
    context: str,
    *,
    pod_ip: str,
    translate: Callable[[str], str],
    include: Callable[[str, str], str],
    scratch: str,
) -> list[Directive]:
    out: list[Directive] = []
    for directive in directives:
        name, args = directive.name, list(directive.args)
        if name in DROPPED:
            continue
        if name == "listen" and args:
            address = listen_address(args[0], pod_ip, translate)
            if address is None:
                continue
            args = [address, *(a for a in args[1:] if not a.startswith("ipv6only"))]
        elif name == "include" and args:
            args = [include(args[0], context)]
        elif name == "error_log":
            args = ["stderr", *args[1:2]]
        elif name == "access_log" and args and args[0] != "off" and not args[0].startswith("syslog:"):
            translated = translate(args[0])
            args = ["/dev/stdout" if translated == args[0] else translated, *args[1:]]
        elif name in PATH_DIRECTIVES and args:
            args = [translate(args[0]), *args[1:]]
        block = None
        if directive.block is not None:
            block = _rewrite_block(
                directive.block, name, pod_ip=pod_ip, translate=translate, include=include, scratch=scratch
            )
            if name == "server" and context == "http" and not any(d.name == "listen" for d in block):
                block.insert(0, Directive("listen", [f"{pod_ip}:80"]))
            if name == "http":
                block[:0] = [Directive(f"{kind}_temp_path", [f"{scratch}/{kind}"]) for kind in TEMP_PATHS]
                if not any(d.name == "access_log" for d in block):  # nginx's default is a file on the host
                    block.insert(0, Directive("access_log", ["/dev/stdout"]))
        out.append(Directive(name, args, block))
    return out


def rewrite(
    text: str,
    *,
    pod_ip: str,
    translate: Callable[[str], str],
    include: Callable[[str, str], str],
    scratch: str,
    main: bool,
    context: str = "main",
) -> str:
    """The configuration for this machine. ``translate`` maps a container path to a host path;
    ``include`` maps an include pattern (and the context it is included in) to the pattern of its
    rewritten copies; ``scratch`` is the
    pod's directory for temp files; ``main``: the top file, which gets ``user root``.
    ``context`` is where an included file is included (``http``, ``server``, ...), so that a
    ``server`` in a ``conf.d`` file gets the same care as one written in place.
    """
    directives = _rewrite_block(
        parse(text), context, pod_ip=pod_ip, translate=translate, include=include, scratch=scratch
    )
    if main:
        directives.insert(0, Directive("user", ["root"]))
    return render(directives)

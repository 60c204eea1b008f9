"""A staged release's archive of stage charts is unpacked whole or not at all, and only as folders and
files inside its own folder, on any Python 3.11 (the image's is older than tarfile's data filter)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from clusterstack_operator.controller.runtime import _unpack
from clusterstack_operator.helm import HelmError


def archive(path: Path, *members: tuple[str, bytes | None, bytes]) -> Path:
    """A gzipped tar of ``(name, content, type)``: a file when content is bytes, else a folder or what
    ``type`` says."""
    with tarfile.open(path, "w:gz") as tar:
        for name, content, kind in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc/passwd"
            if content is not None:
                info.size = len(content)
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    return path


def test_stage_charts_are_unpacked_as_folders_and_files(tmp_path: Path) -> None:
    packed = archive(
        tmp_path / "stages.tgz",
        ("stage-one", None, tarfile.DIRTYPE),
        ("stage-one/Chart.yaml", b"name: stage-one\n", tarfile.REGTYPE),
        ("stage-two/templates/cm.yaml", b"kind: ConfigMap\n", tarfile.REGTYPE),
    )
    _unpack(packed, tmp_path / "out")
    assert (tmp_path / "out" / "stage-one" / "Chart.yaml").read_bytes() == b"name: stage-one\n"
    assert (tmp_path / "out" / "stage-two" / "templates" / "cm.yaml").is_file()
    assert not (tmp_path / "out.partial").exists()


@pytest.mark.parametrize(
    ("member", "said"),
    [
        pytest.param(("../escaped", b"x", tarfile.REGTYPE), "would land outside", id="a path out of it"),
        pytest.param(("/etc/escaped", b"x", tarfile.REGTYPE), "would land outside", id="an absolute path"),
        pytest.param(("stage-one/link", None, tarfile.SYMTYPE), "neither a folder", id="a link"),
        pytest.param(("stage-one/dev", None, tarfile.CHRTYPE), "neither a folder", id="a device"),
    ],
)
def test_an_archive_with_anything_else_is_refused_whole_and_leaves_nothing(
    tmp_path: Path, member: tuple[str, bytes | None, bytes], said: str
) -> None:
    packed = archive(
        tmp_path / "stages.tgz", ("stage-one/Chart.yaml", b"name: stage-one\n", tarfile.REGTYPE), member
    )
    with pytest.raises(HelmError, match=said):
        _unpack(packed, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stages.tgz"]

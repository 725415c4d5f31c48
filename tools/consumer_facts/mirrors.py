"""Local mirrors of upstream repositories (bare git directories, `<mirrors>/<owner>+<name>/repo`) read at tags."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path


def git(repo_dir: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo_dir), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} in {repo_dir}: {done.stderr.strip()}")
    return done.stdout


def mirror(mirrors: Path, repo: str) -> Path:
    found = mirrors / repo.replace("/", "+") / "repo"
    if not found.is_dir():
        raise SystemExit(f"no mirror of {repo} at {found}: fetch it first")
    return found


def commit_of(repo_dir: Path, tag: str) -> str:
    if not git(repo_dir, "tag", "--list", tag).strip():
        raise SystemExit(f"tag {tag} is not in {repo_dir}")
    return git(repo_dir, "rev-parse", f"{tag}^{{commit}}").strip()


def nearest_tag(repo_dir: Path, wanted: str) -> str:
    """`wanted` when the mirror has it, else the newest earlier patch of the same minor (recorded as such)."""
    if git(repo_dir, "tag", "--list", wanted).strip():
        return wanted
    series, _, patch = wanted.rpartition(".")
    earlier = [t for t in git(repo_dir, "tag", "--list", f"{series}.*").split()
               if re.fullmatch(rf"{re.escape(series)}\.\d+", t) and int(t.rpartition(".")[2]) < int(patch)]
    if not earlier:
        raise SystemExit(f"neither {wanted} nor an earlier patch of it is in {repo_dir}")
    return max(earlier, key=lambda t: int(t.rpartition(".")[2]))

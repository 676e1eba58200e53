"""``deskpilot eval ocr --images DIR [--json]``: how well the ocr service reads screenshots.

Every image in DIR (PNG, JPEG, GIF, WebP, BMP) with a ``.txt`` of the same name beside it, the
ground truth, is read by the ocr service's own code path (:class:`ocr.images.ScreenReader`: the
same screening, scaling and line rebuilding, with the settings from the environment, ``OCR_*``,
unless overridden below). ``deskpilot screenshots --out DIR`` renders such a folder.

**Character error rate (CER)** = Levenshtein edit distance (insertions, deletions and
substitutions, one each) between the OCR text and the ground truth, divided by the number of
characters of the ground truth, both normalised first the same way: each line stripped, every run
of whitespace inside a line made one space, empty lines dropped, lines joined with one newline
(a line break counts as one character). Case and punctuation count. The overall CER is the sum of
the distances over the sum of the ground-truth lengths (longer texts weigh more). Target: 5 %.

**Images per second** is wall-clock time over the OCR calls only (the reader is loaded once
before, and its loading time is reported apart), on the torch threads given
(``OCR_TORCH_THREADS``, or ``--threads``), one image at a time; the report says how many CPU cores
the machine has, and the CPU time each image took over all threads, which other load on the
machine does not inflate.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CER_TARGET = 0.05
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp")


def add_parser(evaluations: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = evaluations.add_parser(
        "ocr",
        help="character error rate and speed of the ocr service on screenshots with ground truth",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--images", type=Path, required=True, help="folder of images, each with NAME.txt beside"
    )
    parser.add_argument("--json", action="store_true", help="one JSON report on standard output")
    parser.add_argument(
        "--upscale", type=float, default=None, help="override OCR_UPSCALE (enlarge before OCR)"
    )
    parser.add_argument(
        "--invert-dark",
        choices=("on", "off"),
        default=None,
        help="override OCR_INVERT_DARK (invert dark images before OCR)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="override OCR_TORCH_THREADS (torch CPU threads)"
    )
    parser.add_argument(
        "--show", action="store_true", help="print each image's OCR text under its line"
    )
    return parser


def normalise(text: str) -> str:
    """Lines stripped, whitespace runs made one space, empty lines dropped, joined by newlines."""
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: insertions, deletions and substitutions of one character each."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            )
        previous = current
    return previous[-1]


@dataclass(frozen=True)
class ImageScore:
    name: str
    distance: int
    truth_chars: int
    seconds: float
    cpu_seconds: float
    text: str

    @property
    def cer(self) -> float:
        return self.distance / max(self.truth_chars, 1)


def score(ocr_text: str, truth: str) -> tuple[int, int]:
    """(edit distance, ground-truth characters) after normalising both."""
    expected = normalise(truth)
    return edit_distance(normalise(ocr_text), expected), len(expected)


def labelled_images(folder: Path) -> list[tuple[Path, Path]]:
    return [
        (image, image.with_suffix(".txt"))
        for image in sorted(folder.iterdir())
        if image.suffix.lower() in IMAGE_SUFFIXES and image.with_suffix(".txt").is_file()
    ]


def run_eval_ocr(args: argparse.Namespace) -> int:
    if not args.images.is_dir():
        print(f"deskpilot eval ocr: {args.images} is not a folder", file=sys.stderr)
        return 2
    pairs = labelled_images(args.images)
    if not pairs:
        print(
            f"deskpilot eval ocr: no image with a .txt beside it in {args.images}", file=sys.stderr
        )
        return 2

    from ocr.config import OcrSettings
    from ocr.errors import AttachmentRefused
    from ocr.images import ScreenReader

    overrides: dict[str, Any] = {}
    if args.upscale is not None:
        overrides["upscale"] = args.upscale
    if args.invert_dark is not None:
        overrides["invert_dark"] = args.invert_dark == "on"
    if args.threads is not None:
        overrides["torch_threads"] = args.threads
    settings = OcrSettings(**overrides)

    started = time.perf_counter()
    reader = ScreenReader(settings)
    load_s = time.perf_counter() - started

    scores: list[ImageScore] = []
    refused: list[tuple[str, str]] = []
    for image_path, truth_path in pairs:
        data = image_path.read_bytes()
        began, began_cpu = time.perf_counter(), time.process_time()
        try:
            text = reader.read(data).text
        except AttachmentRefused as exc:
            refused.append((image_path.name, exc.error_code))
            continue
        seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - began_cpu
        distance, chars = score(text, truth_path.read_text(encoding="utf-8"))
        scores.append(ImageScore(image_path.name, distance, chars, seconds, cpu_seconds, text))

    distance = sum(s.distance for s in scores)
    chars = sum(s.truth_chars for s in scores)
    busy_s = sum(s.seconds for s in scores)
    report = {
        "images": len(scores),
        "refused": [{"image": name, "error_code": code} for name, code in refused],
        "cer": distance / max(chars, 1),
        "cer_target": CER_TARGET,
        "edit_distance": distance,
        "truth_chars": chars,
        "images_per_s": len(scores) / busy_s if busy_s else 0.0,
        "mean_s_per_image": busy_s / len(scores) if scores else 0.0,
        "mean_cpu_s_per_image": sum(s.cpu_seconds for s in scores) / max(len(scores), 1),
        "model_load_s": load_s,
        "torch_threads": settings.torch_threads,
        "cpu_cores": os.cpu_count(),
        "gpu": settings.gpu,
        "upscale": settings.upscale,
        "invert_dark": settings.invert_dark,
        "per_image": [
            {
                "image": s.name,
                "cer": s.cer,
                "distance": s.distance,
                "chars": s.truth_chars,
                "seconds": s.seconds,
            }
            for s in scores
        ],
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_report(report, scores, args.show)
    return 0 if not refused else 1


def _print_report(report: dict[str, Any], scores: list[ImageScore], show: bool) -> None:
    width = max((len(s.name) for s in scores), default=10)
    print(f"{'image':<{width}}  {'CER':>7}  {'edits':>5}  {'chars':>5}  {'s':>5}")
    for s in scores:
        print(f"{s.name:<{width}}  {s.cer:>7.2%}  {s.distance:>5}  {s.truth_chars:>5}  "
              f"{s.seconds:>5.2f}")  # fmt: skip
        if show:
            for line in normalise(s.text).splitlines():
                print(f"    | {line}")
    for item in report["refused"]:
        print(f"{item['image']:<{width}}  refused: {item['error_code']}")
    met = "met" if report["cer"] <= CER_TARGET else "NOT met"
    print(
        f"\noverall CER {report['cer']:.2%} ({report['edit_distance']} edits / "
        f"{report['truth_chars']} characters) over {report['images']} images; target "
        f"{CER_TARGET:.0%} {met}"
    )
    print(
        f"{report['images_per_s']:.2f} images/s ({report['mean_s_per_image']:.2f} s each, "
        f"{report['mean_cpu_s_per_image']:.2f} s of CPU time over all threads), one "
        f"at a time on {report['torch_threads']} torch thread(s), {report['cpu_cores']} CPU "
        f"cores, {'GPU' if report['gpu'] else 'CPU only'}; model loaded in "
        f"{report['model_load_s']:.1f} s; upscale {report['upscale']:g}, invert dark "
        f"{'on' if report['invert_dark'] else 'off'}"
    )

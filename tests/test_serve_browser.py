"""``dsm serve`` in a real browser: Playwright driving the machine's headless Chromium (Debian's
``chromium``, which ``make test`` installs) against a real ``dsm serve`` process on a free loopback port.

Each test walks what a person does (open the rows, page forward, open a chat row, an image row, an episode
and play it, follow a deep link) and takes a screenshot: into a temporary folder, or under
``docs/screenshots/`` (linked from the README) when ``DSM_SCREENSHOTS=docs`` (``make screenshots``), so
that a test run never changes a tracked file. Every page must load without a console error (a script or a
policy violation) and without a request to anywhere but the server. ``DSM_TEST_SKIP_SERVERS=browser``
skips these tests on a machine without Chromium (not in CI); ``DSM_CHROMIUM`` names another Chromium
binary.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .servers import _skip_requested
from .web_data import WebRegistry, read_start_document

CHROMIUM = os.environ.get("DSM_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    # Without these, Chromium's own background connections are refused by a closed network (and slow it).
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHOTS = (
    Path(__file__).resolve().parent.parent / "docs" / "screenshots"
    if os.environ.get("DSM_SCREENSHOTS") == "docs"
    else Path(tempfile.gettempdir()) / f"dsm-serve-screenshots-{os.getpid()}"
)
VIEWPORT = {"width": 1280, "height": 860}


@pytest.fixture(scope="module")
def server(web: WebRegistry) -> Iterator[str]:
    """A real ``dsm serve`` on a free loopback port; its base URL."""
    process = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("dsm")),
            "serve",
            "--registry",
            "registry",  # relative to the folder it runs in: the screenshots name no path of this machine
            "--port",
            "0",
            "--json",
            "--cache-dir",
            "cache",
            "--no-access-log",
        ],
        cwd=web.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = read_start_document(process)
        assert started["url"].startswith("http://127.0.0.1:") and started["read_only"]
        assert started["datasets"] >= 8 and started["registry"] == "registry"
        yield started["url"].rstrip("/")
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
    assert code == 0, process.stderr.read() if process.stderr else code  # Ctrl-C: a clean stop
    assert "Traceback" not in (process.stderr.read() if process.stderr else "")


def test_the_real_server_answers_only_to_its_own_name(server: str) -> None:
    import httpx2

    assert httpx2.get(f"{server}/index.json", timeout=30).json()["datasets"]
    assert httpx2.get(f"{server}/", headers={"Host": "attacker.example"}, timeout=30).status_code == 421
    assert httpx2.post(f"{server}/", timeout=30).status_code == 405


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if _skip_requested("browser"):
        pytest.skip("DSM_TEST_SKIP_SERVERS=browser")
    if not os.path.exists(CHROMIUM):
        pytest.fail(
            f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


class Watched:
    """A page with its console errors and any request that left the server recorded."""

    def __init__(self, browser: Any, server: str) -> None:
        self.context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.elsewhere: list[str] = []
        self.media: list[tuple[str, int, str | None]] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

        def route(request_route: Any) -> None:
            url = request_route.request.url
            if url.startswith(server) or url.startswith("data:"):
                request_route.continue_()
            else:
                self.elsewhere.append(url)
                request_route.abort()

        self.context.route("**/*", route)
        self.page.on(
            "response",
            lambda r: (
                self.media.append((r.url, r.status, r.request.headers.get("range")))
                if "/media?" in r.url
                else None
            ),
        )

    def shot(self, name: str, down_to: str | None = None) -> None:
        """A screenshot of the viewport, or of the page from its top down to the element ``down_to``: only
        what is the same on every run (a test's registry has new dates each time), so that the files under
        docs/ change only when the pages do."""
        SHOTS.mkdir(parents=True, exist_ok=True)
        if down_to is None:
            self.page.screenshot(path=str(SHOTS / name), full_page=False)
            return
        box = self.page.locator(down_to).bounding_box()
        assert box is not None, down_to
        clip = {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": box["y"] + box["height"] + 16}
        self.page.screenshot(path=str(SHOTS / name), clip=clip)

    def clean(self) -> None:
        assert self.errors == [], self.errors
        assert self.elsewhere == [], self.elsewhere
        self.context.close()


def until(locator: Any, script: str, *, seconds: float = 30.0) -> Any:
    """Poll ``script`` (a function of the element) until it returns something true; its value. (The pages'
    policy forbids the string evaluation ``wait_for_function`` needs: a policy the tests keep on.)"""
    page = locator.page
    for _ in range(int(seconds * 20)):
        value = locator.evaluate(script)
        if value:
            return value
        page.wait_for_timeout(50)
    raise AssertionError(f"{script} stayed false")


@pytest.fixture
def tab(browser: Any, server: str) -> Iterator[Watched]:
    watched = Watched(browser, server)
    yield watched
    watched.clean()


def test_rows_page_and_paging_forward(tab: Watched, server: str) -> None:
    page = tab.page
    page.goto(f"{server}/d/chats@1/rows")
    assert page.locator("h1").inner_text().startswith("chats@1")
    assert page.locator("table.rows tbody tr").count() == 25
    assert page.locator(".masked").first.inner_text().startswith("***")
    tab.shot("serve-rows.png")
    page.locator("a.next").click()
    page.wait_for_url("**/rows?offset=25&length=25")
    rows = page.locator("table.rows tbody tr")
    assert rows.count() == 5 and rows.first.locator("td").first.inner_text() == "25"
    tab.shot("serve-rows-next.png")
    page.keyboard.press("ArrowLeft")  # back with the keyboard
    page.wait_for_url("**/rows?offset=0&length=25")


def test_open_a_chat_row_by_clicking_it(tab: Watched, server: str) -> None:
    page = tab.page
    page.goto(f"{server}/d/chats@1/rows")
    page.locator("table.rows tbody tr").nth(3).locator("td").nth(2).click()  # the row, not its link
    page.wait_for_url("**/d/chats@1/row/3")
    turns = page.locator(".thread .turn")
    assert turns.count() == 5
    assert turns.nth(4).locator(".who").inner_text().startswith("asistant")
    assert "not one of system" in page.locator(".anomaly").first.inner_text()
    assert page.locator("#field-email .masked").inner_text() == "*** (26 chars)"
    tab.shot("serve-chat.png")


def test_open_an_image_row_the_browser_decodes_it(tab: Watched, server: str) -> None:
    page = tab.page
    page.goto(f"{server}/d/images@1/rows")
    page.locator("table.rows tbody tr").nth(1).locator("td").nth(2).click()
    page.wait_for_url("**/d/images@1/row/1")
    image = page.locator("img.full")
    image.wait_for()
    size = until(
        image, "img => img.complete && img.naturalWidth ? [img.naturalWidth, img.naturalHeight] : null"
    )
    assert size == [24, 16]  # the JPEG of row 1, decoded by Chromium from the served bytes
    tab.shot("serve-image.png")


def test_an_episode_plays_three_steps(tab: Watched, server: str) -> None:
    page = tab.page
    page.goto(f"{server}/d/frames@1/episodes")
    page.locator("table.episodes tbody tr").first.locator("a").click()
    page.wait_for_url("**/d/frames@1/episode?id=0")
    player = page.locator("#player")
    assert player.get_attribute("data-step") == "0"
    player.evaluate("p => { p.dataset.interval = '250'; }")
    page.locator("#play").click()
    until(player, "p => Number(p.dataset.step) >= 3")
    page.locator("#play").click()  # pause
    at = int(player.get_attribute("data-step") or "0")
    assert at >= 3
    assert page.locator("#steps tbody tr.current").get_attribute("data-index") == str(at)
    assert page.locator("#step-label").inner_text().startswith(f"step {at} ")
    assert float(page.locator("#cursor").get_attribute("x1") or 0) > 44  # the plot's cursor moved
    page.locator("button[data-step='last']").click()
    assert page.locator("#now-terminal").is_visible()  # the last step is the terminal one
    page.locator("button[data-step='first']").click()
    for _ in range(3):
        page.locator("button[data-step='next']").click()
    assert player.get_attribute("data-step") == "3"
    assert until(page.locator("#now-observation img"), "img => img.complete && img.naturalWidth") == 12
    assert page.locator(".strip img").count() == 6
    tab.shot("serve-episode.png")


def test_a_deep_link_opens_the_exact_row(tab: Watched, server: str) -> None:
    page = tab.page
    page.goto(f"{server}/d/chats@1/row/17")
    assert page.locator("h1").inner_text() == "chats@1 row 17"
    assert "Question 17" in page.locator(".thread").inner_text()
    assert page.locator("a.permalink").get_attribute("href") == "/d/chats@1/row/17"
    tab.shot("serve-deep-link.png")
    page.goto(f"{server}/d/chats@1/find?key=id=21")  # a link by key lands on the row
    page.wait_for_url("**/d/chats@1/row/21")
    assert page.locator("h1").inner_text() == "chats@1 row 21"


def test_audio_plays_through_range_requests(tab: Watched, server: str) -> None:
    page = tab.page
    page.goto(f"{server}/d/media@1/row/1")
    duration = until(page.locator("audio"), "a => a.readyState >= 1 && a.duration")
    assert abs(duration - 0.5) < 0.01  # Chromium read the WAV header from the served bytes
    assert any(status in (200, 206) and "field=wav" in url for url, status, _ in tab.media)
    assert page.locator("video").count() == 1


def test_diff_page_polls_until_the_comparison_is_done(tab: Watched, server: str) -> None:
    page = tab.page
    page.goto(f"{server}/d/chats@1/diff/chats@2")
    page.wait_for_selector("a.count.changed", timeout=60_000)
    assert page.locator("a.count.changed").inner_text() == "1 changed"
    assert page.locator("table.diff tr.changed td.new").first.inner_text().strip().startswith("fr")
    tab.shot("serve-diff.png")


def test_lineage_graph(tab: Watched, server: str) -> None:
    page = tab.page
    page.goto(f"{server}/d/moving")
    assert page.locator("svg.lineage rect").count() == 2
    page.locator("svg.lineage a[href='/d/moving@2']").click()
    page.wait_for_url("**/d/moving@2")
    assert "cutover" in page.locator("main").inner_text()
    page.goto(f"{server}/d/moving")
    tab.shot("serve-lineage.png", "svg.lineage")

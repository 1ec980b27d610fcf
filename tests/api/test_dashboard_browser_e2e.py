"""The jobs dashboard in a real headless browser (Debian's Chromium) against a real `poolq dev up`
stack: a key entered once, the job list updating live while a long job runs, errors by code and
per-code samples of a finished job, result download links, cancelling from the page (the API then
says cancelled), the schedules of an admin key, the models a worker holds, a phone-width layout, the
pictures (a running job's tokens/s line, errors by code and the data report's histograms as bars) drawn
from the jobs' data with their text alternatives, no console errors (a CSP refusal would be one) and
nothing loaded from another host. Screenshots are kept as artifacts: their folder is printed."""
import os
import subprocess
import sys
import time

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait
from support.browser import artifacts_dir, headless_chromium, missing_browser, set_viewport
from support.dev_stack import LIVE_STACK_ENV, dev_stack
from support.svg_charts import bars, check_bars, check_tokens_line, histogram_bars, other_hosts, sparkline

from poolq.api.client.poolq_client import PoolqClient

pytestmark = pytest.mark.integration

TERMINAL = {"succeeded", "partially_succeeded", "failed", "cancelled"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    if (why := missing_browser()) is not None:
        pytest.fail(why)
    with dev_stack(tmp_path_factory.mktemp("dashboard"), env=LIVE_STACK_ENV) as info:
        yield info


@pytest.fixture(scope="module")
def client(stack):
    with PoolqClient(stack["api_url"], stack["api_key"]) as poolq:
        yield poolq


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    folder = artifacts_dir(tmp_path_factory.mktemp("dashboard-screenshots"))
    print(f"\ndashboard screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def finished_job(client, sample_documents) -> dict:
    """A job that ended before the long one starts: some records over the model's window (failed by code)."""
    documents = [{"id": f"speech-{i}", "text": document["text"]} for i, document in enumerate(sample_documents[:6])]
    documents += [{"id": f"query-{i}", "text": f"a short query {i}"} for i in range(4)]
    job = client.submit({"input": {"documents": documents}})
    return _wait(client, job["id"], lambda j: j["status"] in TERMINAL)


@pytest.fixture(scope="module")
def chunked_job(client, sample_documents) -> dict:
    """A small job that embeds its documents' chunks of 3 sentences: its data report has a histogram of chunk lengths."""
    documents = [{"id": f"speech-{i}", "text": document["text"]} for i, document in enumerate(sample_documents[6:12])]
    documents += [{"id": f"query-{i}", "text": f"a short query {i}"} for i in range(2)]
    job = client.submit({"input": {"documents": documents}, "long_documents": {"mode": "naive_chunks", "chunk_by": "sentences"}})
    return _wait(client, job["id"], lambda j: j["status"] in TERMINAL)


@pytest.fixture(scope="module")
def long_text(long_documents) -> str:
    text = "\n\n".join(document["text"] for document in long_documents)
    return (text * (1 + 200_000 // len(text)))[:200_000]


def _wait(client, job_id: str, until, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while not until(job := client.get(job_id)):
        assert time.monotonic() < deadline, f"job {job_id} never got there: {job}"
        time.sleep(0.3)
    return job


def _until(driver, condition, timeout: float = 90, what: str = ""):
    # The page redraws what changed every poll: an element found a moment ago may be gone; look again
    wait = WebDriverWait(driver, timeout, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,))
    return wait.until(lambda d: condition(d), message=what)


def _sign_in(driver, url: str, key: str) -> None:
    driver.get(f"{url}/")  # the root redirects to the dashboard
    assert driver.current_url.endswith("/ui"), driver.current_url
    field = _until(driver, lambda d: _shown(d, "api-key"))
    assert driver.switch_to.active_element == field  # the key field has the focus: type, then Enter
    field.send_keys(key, Keys.ENTER)


def _shown(driver, element_id: str):
    element = driver.find_element(By.ID, element_id)
    return element if element.is_displayed() else None


def _page_status(driver) -> str | None:
    return driver.find_element(By.CSS_SELECTOR, "article[data-job-id]").get_attribute("data-status")


def _row(driver, job_id: str):
    rows = driver.find_elements(By.CSS_SELECTOR, f'tr[data-job-id="{job_id}"]')
    return rows[0] if rows else None


def _row_text(driver, job_id: str) -> str:
    return driver.execute_script("const row = document.querySelector(`tr[data-job-id='${arguments[0]}']`);"
                                 "return row ? row.innerText : '';", job_id)


def _tokens_shown(driver, job_id: str) -> int:
    tokens = driver.execute_script("const cell = document.querySelector(`tr[data-job-id='${arguments[0]}'] td.tokens-done`);"
                                   "return cell ? cell.dataset.tokens : null;", job_id)
    return -1 if tokens is None else int(tokens)


def _console_errors(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def _line_of(driver, selector: str, points: int):
    line = sparkline(driver, selector)
    return line if line and line["points"] >= points else None


def test_watch_a_job_live_and_cancel_it_from_the_page(stack, client, finished_job, long_text, artifacts):
    assert finished_job["status"] == "partially_succeeded" and finished_job["errors_by_code"], finished_job
    # Long enough to be watched running on a fast CPU too (it is cancelled below, never waited for): 8 documents of
    # ~45k tokens, each distinct (no reuse between them): one alone ended before the job page drew its line in a CI
    # run on a Xeon with AMX (2026-12-05)
    documents = [{"id": f"long-{i}", "text": f"Part {i}. {long_text}"} for i in range(8)]
    running = client.submit({"input": {"documents": documents}, "long_documents": {"mode": "chunked"}})
    with headless_chromium(1280, 800) as driver:
        set_viewport(driver, 1280, 800)
        _sign_in(driver, stack["api_url"], stack["api_key"])
        # The running job appears in the list, and its tokens done move while the page only polls
        first = _until(driver, lambda d: _tokens_shown(d, running["id"]) > 0 and _tokens_shown(d, running["id"]),
                       what="the running job never showed tokens done")
        later = _until(driver, lambda d: _tokens_shown(d, running["id"]) > first and _tokens_shown(d, running["id"]),
                       what="the running job's progress never moved on the page")
        assert later > first
        list_line = _until(driver, lambda d: _line_of(d, f'tr[data-job-id="{running["id"]}"] svg.sparkline', 2),
                           what="the running job's row drew no tokens/s line")
        check_tokens_line(list_line)
        assert sparkline(driver, f'tr[data-job-id="{finished_job["id"]}"] svg.sparkline') is None  # never seen running
        for code in finished_job["errors_by_code"]:
            assert code in _row_text(driver, finished_job["id"])  # errors by code, in the list
        driver.save_screenshot(str(artifacts / "jobs-1280x800.png"))
        driver.find_element(By.TAG_NAME, "body").screenshot(str(artifacts / "jobs-list.png"))  # the page, cropped
        # The key was kept for the session: a reload asks for nothing
        driver.refresh()
        _until(driver, lambda d: _row(d, running["id"]) is not None, what="after a reload the list did not come back")
        assert not driver.find_element(By.ID, "key-form").is_displayed()

        # The running job's page: options, live progress, and the cancel button
        # From the keyboard: the job's link keeps the focus while the list redraws, and Enter opens it
        link_id = f"link-{running['id']}"
        _until(driver, lambda d: d.find_element(By.ID, link_id))
        driver.execute_script("document.getElementById(arguments[0]).focus()", link_id)
        moved = _tokens_shown(driver, running["id"])
        _until(driver, lambda d: _tokens_shown(d, running["id"]) > moved, what="the list stopped updating")
        assert driver.switch_to.active_element.get_attribute("id") == link_id
        driver.switch_to.active_element.send_keys(Keys.ENTER)
        _until(driver, lambda d: d.find_elements(By.ID, "cancel-job"))
        assert '"mode": "chunked"' in _until(driver, lambda d: d.find_element(By.ID, "options").text)
        # Its tokens/s over time: the list's readings and the page's own, one more each poll
        line = _until(driver, lambda d: _line_of(d, "#throughput svg.sparkline", 4), what="the job page drew no tokens/s line")
        check_tokens_line(line)
        driver.save_screenshot(str(artifacts / "job-running-1280x800.png"))
        driver.find_element(By.ID, "progress").screenshot(str(artifacts / "job-throughput.png"))
        # a real button: the keyboard works it (found again: each poll redraws the page, the line with it)
        _until(driver, lambda d: d.find_element(By.ID, "cancel-job").send_keys(Keys.ENTER) or True)
        _until(driver, lambda d: _page_status(d) == "cancelled", timeout=120, what="the page never showed the job cancelled")
        assert client.get(running["id"])["status"] == "cancelled"  # the API agrees: it really ended
        assert not driver.find_elements(By.ID, "cancel-job")
        assert _line_of(driver, "#throughput svg.sparkline", line["points"])  # the line stays after the end
        driver.save_screenshot(str(artifacts / "job-cancelled-1280x800.png"))
        assert other_hosts(driver) == []

        # The finished job's page: samples per error code, and download links for its parts
        driver.get(f"{stack['api_url']}/ui#/jobs/{finished_job['id']}")
        results = 'article[data-job-id="%s"] #results a[download]' % finished_job["id"]
        links = _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, results))
        assert len(links) == len(client.results(finished_job["id"])["parts"]) + 1  # each part, and the error file
        errors = driver.find_element(By.ID, "errors").text
        assert all(code in errors for code in finished_job["errors_by_code"]) and "speech-" in errors, errors
        driver.find_element(By.TAG_NAME, "body").screenshot(str(artifacts / "job-finished.png"))
        assert _console_errors(driver) == []


def test_a_finished_jobs_errors_and_data_report_are_drawn_as_bars(stack, client, finished_job, chunked_job, artifacts):
    by_code = sorted(finished_job["errors_by_code"].items(), key=lambda item: (-item[1], item[0]))
    with headless_chromium(1280, 800) as driver:
        _sign_in(driver, stack["api_url"], stack["api_key"])
        for job, fields in ((finished_job, {"document_tokens": " documents"}),
                            (chunked_job, {"document_tokens": " documents", "chunk_tokens": " rows"})):
            driver.get(f"{stack['api_url']}/ui#/jobs/{job['id']}")
            report = client.results(job["id"]).manifest["report"]
            for field, unit in fields.items():
                chart = _until(driver, lambda d: bars(d, f'article[data-job-id="{job["id"]}"] #histogram-{field} figure'),
                               what=f"no {field} histogram drawn")
                what = "documents" if field == "document_tokens" else "chunk rows"
                check_bars(chart, histogram_bars(report, field, unit), f"{what} by length in tokens")
            assert other_hosts(driver) == [] and _console_errors(driver) == []
        driver.find_element(By.ID, "block-report").screenshot(str(artifacts / "job-report.png"))
        driver.get(f"{stack['api_url']}/ui#/jobs/{finished_job['id']}")
        chart = _until(driver, lambda d: bars(d, f'article[data-job-id="{finished_job["id"]}"] #errors figure'))
        check_bars(chart, [f"{code}: {count:,} records" for code, count in by_code], "failed records by error code")
        assert other_hosts(driver) == [] and _console_errors(driver) == []


def test_the_list_pages_back_through_older_jobs(stack, client, finished_job):
    newer = client.submit({"input": {"documents": [{"id": "a", "text": "a job newer than the finished one"}]}})
    _wait(client, newer["id"], lambda j: j["status"] in TERMINAL)
    newest, older = client.jobs(limit=2)["jobs"]
    with headless_chromium(1280, 800) as driver:
        _sign_in(driver, stack["api_url"], stack["api_key"])
        _until(driver, lambda d: _row(d, newest["id"]) is not None)
        driver.get(f"{stack['api_url']}/ui#/?limit=1")  # a page of one job: the newest
        _until(driver, lambda d: _listed(d) == [newest["id"]], what="the first page is not the newest job")
        assert not driver.find_elements(By.ID, "newest-jobs")
        _until(driver, lambda d: _shown(d, "older-jobs")).send_keys(Keys.ENTER)  # a link: the keyboard follows it
        _until(driver, lambda d: _listed(d) == [older["id"]], what="the older page does not show the next job")
        assert "older jobs" in driver.find_element(By.ID, "view").text
        _until(driver, lambda d: _shown(d, "newest-jobs")).click()
        _until(driver, lambda d: _listed(d) == [newest["id"]], what="the newest page did not come back")
        assert _console_errors(driver) == []


def _listed(driver) -> list[str]:
    return driver.execute_script("return [...document.querySelectorAll('tr[data-job-id]')].map((r) => r.dataset.jobId)")


def test_an_admin_key_sees_its_schedules(stack, client, tmp_path):
    source = tmp_path / "corpus.jsonl"
    source.write_text('{"id": "a", "text": "one"}\n', encoding="utf-8")
    schedule = client.create_schedule({"cron": "0 3 * * *", "input": {"uri": client.upload(source)}, "enabled": False})
    with headless_chromium(1280, 800) as driver:
        _sign_in(driver, stack["api_url"], stack["api_key"])
        _until(driver, lambda d: _shown(d, "nav-schedules")).click()
        row = _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-schedule-id="{schedule["id"]}"]'))[0]
        assert "0 3 * * *" in row.text
        assert _console_errors(driver) == []


def test_the_models_view_shows_what_the_worker_holds(stack, client, finished_job, artifacts):
    model = finished_job["model"]  # the stack's worker loaded it to run the job
    with headless_chromium(1280, 800) as driver:
        _sign_in(driver, stack["api_url"], stack["api_key"])
        _until(driver, lambda d: _shown(d, "nav-models")).send_keys(Keys.ENTER)
        selector = f'tr[data-model-id="{model}"]'
        row = _until(driver, lambda d: [r for r in d.find_elements(By.CSS_SELECTOR, selector)
                                        if int(r.get_attribute("data-loaded-workers")) >= 1],
                     what=f"{model} never showed loaded on a worker")[0]
        listed = {entry.id: entry for entry in client.models().data}[model]
        text = row.text
        assert "embed" in text and f"{listed.dimensions:,}" in text and f"{listed.window:,} tokens" in text, text
        assert " worker" in text and " MiB" in text, text  # loaded on N workers; its resident memory, in binary units
        assert driver.find_element(By.ID, "nav-models").get_attribute("aria-current") == "page"
        driver.find_element(By.TAG_NAME, "body").screenshot(str(artifacts / "models.png"))
        assert _console_errors(driver) == []


def test_a_nav_link_reached_while_the_page_loads_keeps_the_focus_and_its_enter(stack):
    """The page's first view does not take the focus from a nav link the keyboard reached while the
    page was still asking the API what the key may see (a press of Enter meant for it was lost)."""
    with headless_chromium(1280, 800) as driver:
        driver.get(f"{stack['api_url']}/")
        field = _until(driver, lambda d: _shown(d, "api-key"))
        # The schedules check that signing in makes is held until the test lets it answer
        driver.execute_script("""
            const realFetch = window.fetch;
            window.heldAnswer = new Promise((resolve) => { window.releaseAnswer = resolve; });
            window.fetch = async (url, options) => {
              if (String(url).includes("/v1/schedules")) await window.heldAnswer;
              return realFetch(url, options);
            };""")
        field.send_keys(stack["api_key"], Keys.ENTER)
        link = _until(driver, lambda d: _shown(d, "nav-models"))
        driver.execute_script("arguments[0].focus()", link)  # reached from the keyboard while the page loads
        driver.execute_script("window.releaseAnswer()")
        _until(driver, lambda d: d.find_element(By.ID, "updated").text, what="the first view never drew")
        assert driver.switch_to.active_element.get_attribute("id") == "nav-models"
        driver.switch_to.active_element.send_keys(Keys.ENTER)
        _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "tr[data-model-id]"), what="Enter never opened the models")


def test_a_tenant_key_sees_only_its_jobs_and_no_schedules(stack, finished_job):
    env = {name: value for name, value in os.environ.items() if not name.startswith("POOLQ_")}
    created = subprocess.run([sys.executable, "-m", "poolq.api", "keys", "create", "--tenant", "other"], env={
        **env, "POOLQ_DEV_DIR": stack["dir"]}, capture_output=True, text=True, timeout=120)
    assert created.returncode == 0, created.stderr
    with headless_chromium(390, 844) as driver:
        set_viewport(driver, 390, 844)  # a phone
        _sign_in(driver, stack["api_url"], created.stdout.strip().splitlines()[-1])
        _until(driver, lambda d: "No jobs yet" in d.find_element(By.ID, "view").text, what="another tenant's jobs were listed")
        assert not driver.find_element(By.ID, "nav-schedules").is_displayed()
        # a wrong key is refused with a message, and the form comes back
        driver.find_element(By.ID, "forget-key").click()
        driver.find_element(By.ID, "api-key").send_keys("pq_not-a-key", Keys.ENTER)
        _until(driver, lambda d: "not valid" in d.find_element(By.ID, "key-error").text)


def test_the_list_fits_a_phone(stack, finished_job, artifacts):
    with headless_chromium(390, 844) as driver:
        set_viewport(driver, 390, 844)
        _sign_in(driver, stack["api_url"], stack["api_key"])
        _until(driver, lambda d: _row(d, finished_job["id"]) is not None)
        # one card per job, nothing wider than the screen (no sideways scrolling)
        assert driver.execute_script("return document.documentElement.scrollWidth") <= 390
        assert _row(driver, finished_job["id"]).value_of_css_property("display") == "block"
        driver.save_screenshot(str(artifacts / "jobs-phone-390x844.png"))
        assert _console_errors(driver) == []


def test_blocks_of_other_features_render_when_present(stack):
    """reuse, report, sinks, webhook and engine (each added by its own feature) show generically,
    rendered by the page's own module in the browser."""
    status = {"reuse": {"reused_documents": 90, "reused_tokens": 12345, "computed_tokens": 678},
              "sinks": [{"name": "search-db", "state": "failed", "upserted": 10, "deleted": 2, "unchanged": 88,
                         "error": "connection refused"}],
              "engine": {"model": "all-MiniLM-L6-v2", "dtype": "float32"}}
    manifest = {"report": {"documents": 100, "languages": {"en": 99, "de": 1}}, "webhook": {"state": "delivered"},
                "sinks": [{"name": "shadowed-by-the-status"}]}
    with headless_chromium(1280, 800) as driver:
        driver.get(f"{stack['api_url']}/ui")
        text = driver.execute_async_script("""
            const [status, manifest, done] = arguments;
            import("./ui/assets/blocks.js").then(({ extraBlocks }) => {
              const box = document.createElement("div");
              box.append(...extraBlocks(status, manifest).filter(Boolean));
              done(box.innerText);
            }, (error) => done(`import failed: ${error}`));""", status, manifest)
        for expected in ("Reuse", "12,345", "Data report", "languages", "Sinks", "search-db", "connection refused",
                         "Webhook", "delivered", "Engine", "float32"):
            assert expected in text, (expected, text)
        assert "shadowed-by-the-status" not in text  # the live status wins over the manifest
        assert _console_errors(driver) == []

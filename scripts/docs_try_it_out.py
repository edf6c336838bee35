"""Uses the intake-api's docs page as a partner would, in headless Chromium: Authorize with
the client's credentials, then "Try it out" with each of submitEnquiry's named examples and
with attachProduct's, and checks each answered its documented success.

  python3 scripts/docs_try_it_out.py INTAKE_URL DEMO_CLIENT_JSON CHROMIUM
"""

import json
import sys

from playwright.sync_api import sync_playwright

INTAKE, DEMO, CHROMIUM = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def authorize(page):
    page.click(".btn.authorize")
    modal = page.locator(".modal-ux")
    modal.locator("input[data-name='clientId'], input#client_id_clientCredentials").first.fill(DEMO["client_id"])
    modal.locator("input[data-name='clientSecret'], input#client_secret_clientCredentials").first.fill(DEMO["client_secret"])
    modal.locator("label[for*='enquiry:case:intake:create']").first.click()
    modal.locator("button.authorize").first.click()
    modal.locator("button.btn-done, button.close-modal").first.wait_for()
    authorized = "Authorized" in modal.inner_text()
    check(authorized, "Authorize with the client's credentials gets a token")
    modal.locator("button.btn-done, button.close-modal").first.click()


def execute(op, what, expected):
    responses = op.locator(".live-responses-table")
    op.locator("button.execute").click()
    cell = responses.locator("tbody .response-col_status").first
    cell.wait_for(timeout=15000)
    status = cell.inner_text().strip()
    check(status in expected, f"{what}: Try it out answers {status} (documented success: {', '.join(expected)})")
    op.locator("button.btn-clear").first.click()


def main():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(f"{INTAKE}/docs/")
        authorize(page)

        submit = page.locator("#operations-Intake-submitEnquiry")
        submit.locator(".opblock-summary").click()
        submit.locator("button.try-out__btn").click()
        examples = submit.locator(".opblock-section-request-body select.examples-select__select, .opblock-section-request-body select").last
        names = examples.locator("option").all_inner_texts()
        check(len(names) >= 3, f"submitEnquiry offers its named examples: {names}")
        for name in names:
            examples.select_option(label=name)
            execute(submit, f"submitEnquiry example {name!r}", ("200", "201"))

        attach = page.locator("#operations-Intake-attachProduct")
        attach.locator(".opblock-summary").click()
        attach.locator("button.try-out__btn").click()
        execute(attach, "attachProduct example", ("200",))
        browser.close()
    if failures:
        sys.exit(f"{len(failures)} docs-page check(s) failed")


main()

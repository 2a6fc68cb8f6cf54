#!/usr/bin/env bash
# The browser tests (tests/test_ui_browser.py) drive the system chromium with Playwright.
# Installs Debian's chromium when it is missing and we are root; otherwise says how and leaves it
# to the tests (they skip without a browser, and fail under CI=true).
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium for the browser tests (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q chromium; }
else
    echo "chromium not found: the browser tests will skip (as root, apt-get install chromium)" >&2
fi

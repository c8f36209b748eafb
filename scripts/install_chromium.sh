#!/usr/bin/env bash
# Install Debian's Chromium for the browser tests (tests/audit/test_browser.py) when it is missing and
# can be installed: as root or with passwordless sudo, with apt-get. Otherwise say so plainly; the
# browser tests then skip, and the test summary names the reason. Never fails the caller.
set -uo pipefail

if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
    exit 0
fi
as_root=""
if [ "$(id -u)" -eq 0 ]; then
    :
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root="sudo -n"
else
    echo "chromium is not installed and cannot be installed here (not root, no passwordless sudo):" \
         "the browser tests will be skipped. Install it with: apt-get install chromium" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium is not installed and there is no apt-get here: the browser tests will be skipped." \
         "Install Chromium with your system's package manager." >&2
    exit 0
fi
echo "installing chromium (for the browser tests)" >&2
export DEBIAN_FRONTEND=noninteractive
# Try the local package lists first; refresh them only if that fails.
if ! { $as_root apt-get install -y -qq chromium >/dev/null 2>&1 \
       || { $as_root apt-get update -qq >/dev/null && $as_root apt-get install -y -qq chromium >/dev/null; }; }; then
    echo "installing chromium failed: the browser tests will be skipped. Install it with: apt-get install chromium" >&2
fi
exit 0

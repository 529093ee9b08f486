@echo off
rem The operator console on Windows. On a fresh clone it makes .venv and installs the project
rem first. Every argument goes to the click command line (`bin\console.bat help`).
setlocal
cd /d "%~dp0\.."

if not exist ".venv\Scripts\python.exe" (
  echo console.bat: creating .venv 1>&2
  py -3 -m venv .venv || python -m venv .venv || exit /b 1
)

if not exist ".venv\Scripts\console.exe" (
  echo console.bat: installing the project into .venv 1>&2
  ".venv\Scripts\python.exe" -m pip install --quiet --upgrade pip || exit /b 1
  ".venv\Scripts\python.exe" -m pip install --quiet -e . || exit /b 1
)

".venv\Scripts\console.exe" %*
exit /b %ERRORLEVEL%

# shellcheck shell=bash
# Sourced, after `set -Eeuo pipefail`, by the scripts a reviewer runs (reproduce.sh, tools/test.sh,
# tools/wheelhouse.sh, tools/apex_sources.sh), each of which then sets
#
#   trap 'unexpected $? $LINENO "$BASH_COMMAND" NAME "WHAT TO SEND"' ERR
#
# A refusal is the script's own line and exit 2. A failure no line of it foresaw ends here: one line that says where
# (the line and the command) and exit 3, never a silent end by `set -e`. -E makes the trap fire inside functions; in a
# subshell (a command substitution, a pipeline) it does nothing, since the command that holds the subshell fails in
# the script itself and is reported there, once.
unexpected() {  # unexpected STATUS LINE COMMAND NAME WHAT
  [ "$BASHPID" = "$$" ] || return 0
  # a line of a file the script sources (tools/reproduce/*.sh) is named with that file, from the checkout's root
  local at="line $2" src="${BASH_SOURCE[1]:-}"
  [ -z "$src" ] || [ "${src##*/}" = "${4##*/}" ] || at="line $2 of ${src#"${src%/tools/*}/"}"
  echo "$4: unexpected failure at $at: ${3//$'\n'/ } (exit $1); report it, with $5" >&2
  exit 3
}

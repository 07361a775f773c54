#!/usr/bin/env bash
# Makes moa.txt: MOA's alarms on sequences.txt.gz (see Alarms.java), the
# reference that drift's conformance test (reference_test.go) checks every
# detector against. Needs Java 17 and Maven (MOA comes from Maven Central),
# and Python 3 to remake the sequences.
#
#   bash drift/testdata/reference/run.sh
set -euo pipefail
cd "$(dirname "$0")"
moa_version=2024.07.0
python3 sequences.py | gzip -9 -n > sequences.txt.gz
mvn -q dependency:get -Dartifact=nz.ac.waikato.cms.moa:moa:$moa_version -Dtransitive=false
jar="$HOME/.m2/repository/nz/ac/waikato/cms/moa/moa/$moa_version/moa-$moa_version.jar"
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
javac -d "$build" -cp "$jar" Alarms.java
{
  echo "# MOA $moa_version change detectors at their default options on sequences.txt.gz:"
  echo "# sequence detector alarm-indices (0-based). Made by run.sh."
  java -cp "$jar:$build" Alarms sequences.txt.gz
} > moa.txt
echo "wrote $(grep -vc '^#' moa.txt) rows to moa.txt"

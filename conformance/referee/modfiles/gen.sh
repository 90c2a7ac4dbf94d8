#!/bin/sh
# Regenerates modfiles/1.NN.mod (+ .sum) for a kubelet release from
# k8s.io/kubernetes's own go.mod: every staging module it replaces with a
# local directory is pinned to the matching v0.NN.P tag. Maintainers run it
# when moving a release to a new patch; build.sh only reads the results.
# Usage (from conformance/referee): modfiles/gen.sh v1.37.2
# Not `go mod tidy`: tidy reads every file whatever its build tags, and the
# other releases' shim files import packages this release does not have;
# `go list -tags` resolves exactly this release's imports.
set -eu
version=$1
minor=$(echo "$version" | cut -d. -f2)
patch=$(echo "$version" | cut -d. -f3)
staging="v0.$minor.$patch"
out=modfiles/1.$minor.mod
go mod download k8s.io/kubernetes@"$version"
src=$(go env GOMODCACHE)/k8s.io/kubernetes@$version/go.mod
{
	echo "module dpctl/conformance/referee"
	echo
	echo "go $(sed -n 's/^go \(.*\)/\1/p' "$src")"
	echo
	echo "require k8s.io/kubernetes $version"
	echo
	echo "replace ("
	sed -n '/^replace (/,/^)/p' "$src" | sed -n "s#^\t\(k8s.io/[^ ]*\) => ./staging/src/.*#\t\1 => \1 $staging#p"
	echo ")"
} >"$out"
: >"${out%.mod}.sum"
go list -mod=mod -modfile="$out" -tags "k8s_1_$minor" -deps . >/dev/null
echo "wrote $out"

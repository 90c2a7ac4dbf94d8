# Sourced by kubelet.sh and cluster.sh (not run): what building a
# k8s.io/kubernetes command of release 1.NN from the Go module proxy needs.
#
# k8s_release WHO R WORK: reads the k8s.io/kubernetes version the referee's
# modfiles/R.mod pins into $version (failing with "build.sh WHO: ..." when
# there is none), copies that modfile and its go.sum to WORK/R.mod and
# WORK/R.sum (k8s_build's -modfile: -mod=mod adds the go.sum lines the
# commands need beyond the referee's there, and the repository's files stay
# untouched), and sets $ldflags: static-binary flags plus the version stamp
# the upstream release build sets (-X k8s.io/component-base/version...).
k8s_release() {
	k8s_mod=$here/referee/modfiles/$2.mod
	version=$(sed -n 's/^require k8s.io\/kubernetes \(v[^ ]*\)$/\1/p; s/^\tk8s.io\/kubernetes \(v[^ ]*\)$/\1/p' "$k8s_mod" | head -1)
	if [ -z "$version" ]; then
		echo "build.sh $1: $k8s_mod does not pin k8s.io/kubernetes" >&2
		exit 1
	fi
	cp "$k8s_mod" "$3/$2.mod"
	cp "${k8s_mod%.mod}.sum" "$3/$2.sum"
	k8s_major=$(echo "$version" | cut -d. -f1 | tr -d v)
	k8s_minor=$(echo "$version" | cut -d. -f2)
	ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version"
	ldflags="$ldflags -X k8s.io/component-base/version.gitMajor=$k8s_major -X k8s.io/component-base/version.gitMinor=$k8s_minor"
	ldflags="$ldflags -X k8s.io/component-base/version.gitTreeState=clean"
}

# k8s_build DIR MODFILE LDFLAGS ARGS...: `go build` in DIR with the modfile
# copy (-mod=mod), static (CGO_ENABLED=0 unless set), path-free (-trimpath)
# and linked with LDFLAGS: the same compile flags for every command of a
# release (and for the referee, see build.sh), so the packages they share
# compile once in GOCACHE.
k8s_build() {
	k8s_dir=$1
	k8s_modfile=$2
	k8s_ldflags=$3
	shift 3
	(cd "$k8s_dir" && CGO_ENABLED=${CGO_ENABLED:-0} go build -mod=mod -modfile="$k8s_modfile" -trimpath -ldflags="$k8s_ldflags" "$@")
}

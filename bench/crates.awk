# Sums `perf report --sort dso,sym` self time by where it is spent: the kernel, libc, or the
# Rust crate (the first path segment of the demangled symbol) in the service binary.
# Usage: awk -v bin=intake-api -f bench/crates.awk REPORT
/%/ && !/^#/ {
    pct = $1
    sub(/%/, "", pct)
    dso = $2
    sym = $0
    sub(/^.*\[[.k]\] /, "", sym)
    if (dso != bin) {
        group = dso == "[kernel.kallsyms]" ? "kernel" : dso
    } else if (sym ~ /^aws_lc_|_mont$|_internal$|^sha256_|^aes_/) {
        group = "aws-lc (C and assembly)"
    } else {
        s = sym
        while (sub(/^(<|&|mut |dyn |impl )/, "", s)) {}
        if (s ~ /::/) {
            sub(/::.*/, "", s)
            sub(/<.*/, "", s)
            group = s
        } else {
            group = "other (" bin ")"
        }
    }
    total[group] += pct
}
END {
    for (g in total) printf "%7.2f%%  %s\n", total[g], g
}

function __dpctl_sockets
    for f in (__fish_complete_path (commandline -ct))
        if test -S $f; or test -d $f
            echo $f
        end
    end
end

# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_dpctl_global_optspecs
    string join \n o/output= color= v/verbose q/quiet no-trunc no-headers h/help V/version
end

function __fish_dpctl_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_dpctl_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_dpctl_using_subcommand
    set -l cmd (__fish_dpctl_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c dpctl -n "__fish_dpctl_needs_command" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_needs_command" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_needs_command" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_needs_command" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_needs_command" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_needs_command" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_needs_command" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "plugin" -d 'Talk to a device plugin\'s socket as the kubelet would'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "kubelet-sim" -d 'Be the kubelet\'s device manager: accept registrations, admit pods, restart'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "podresources" -d 'Read a kubelet\'s PodResources API'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "mock-plugin" -d 'Be a device plugin, well-behaved or misbehaving on request'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "dra" -d 'DRA drivers: call a driver\'s sockets as the kubelet does (info, prepare, unprepare, watch-health) with the answers judged, or be a mock DRA driver'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "apiserver" -d 'Serve the Kubernetes API a DRA driver needs (claims, Node, ResourceSlices) from a file, with no cluster; record the slices it publishes'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "smoke" -d 'Run a vendor\'s plugin against a fresh kubelet-sim and check it end to end'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "scenario" -d 'Run scenario files on kubelet-sim or a referee (the kubelet\'s own code); diff the two'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "demo" -d 'Watch kubelet-sim and mock-plugin work together, in a temporary directory'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "checkpoint" -d 'Read the kubelet\'s device-manager checkpoint: show it, verify its checksum (read-only)'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "doctor" -d 'Check a node\'s device-plugin setup in one read-only run: findings with evidence and hints'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "explain" -d 'Name the cause of a kubelet admission error as pasted, the releases that say it, and the check'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "bench" -d 'Load-test a device plugin as a busy node does: throughput, latency, errors, contract violations'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "completions" -d 'Print a shell completion script'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "options" -d 'Print the options every command takes (they are left out of each command\'s help)'
complete -c dpctl -n "__fish_dpctl_needs_command" -f -a "help" -d 'Print a command\'s full help, or a reference topic (dpctl help topics lists them)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and not __fish_seen_subcommand_from call watch check" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and not __fish_seen_subcommand_from call watch check" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and not __fish_seen_subcommand_from call watch check" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and not __fish_seen_subcommand_from call watch check" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and not __fish_seen_subcommand_from call watch check" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and not __fish_seen_subcommand_from call watch check" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and not __fish_seen_subcommand_from call watch check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and not __fish_seen_subcommand_from call watch check" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and not __fish_seen_subcommand_from call watch check" -f -a "call" -d 'Make one call to a plugin'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and not __fish_seen_subcommand_from call watch check" -f -a "watch" -d 'Stream ListAndWatch: every snapshot, with added, removed and health-changed devices marked, and capacity/allocatable as the kubelet counts them. Stops after --count messages, at --timeout, or on Ctrl-C'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and not __fish_seen_subcommand_from call watch check" -f -a "check" -d 'Run the sanity suite: does the plugin behave as the kubelet needs?'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from call" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from call" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from call" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from call" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from call" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from call" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from call" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from call" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from call" -f -a "options" -d 'GetDevicePluginOptions'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from call" -f -a "list" -d 'The first ListAndWatch message (one snapshot of the device list)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from call" -f -a "allocate" -d 'Allocate: one container request per --devices group'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from call" -f -a "preferred" -d 'GetPreferredAllocation for one container, checking the answer against the contract (subset of available, includes must-include, right size)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from call" -f -a "prestart" -d 'PreStartContainer for the given devices'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -l socket -d 'The plugin\'s socket' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -l dir -d 'The device-plugin directory (with --endpoint)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -l endpoint -d 'The plugin\'s socket name in --dir, as it registers it (e.g. nvidia-gpu.sock)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -l timeout -d 'Deadline of the call; for `watch`, how long to watch [default: 10s; watch: until stopped]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -l connect-timeout -d 'Limit for connecting to the socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -l max-recv-bytes -d 'Largest message accepted [default: the kubelet\'s 4 MiB]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -l count -d 'Stop after this many messages' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from watch" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l socket -d 'The plugin\'s socket' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l dir -d 'The device-plugin directory (with --endpoint)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l endpoint -d 'The plugin\'s socket name in --dir, as it registers it (e.g. nvidia-gpu.sock)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l timeout -d 'Deadline of the call; for `watch`, how long to watch [default: 10s; watch: until stopped]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l connect-timeout -d 'Limit for connecting to the socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l max-recv-bytes -d 'Largest message accepted [default: the kubelet\'s 4 MiB]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l only -d 'Run only these checks (comma-separated names; see --list)' -r -f -a "options-answer\t''
list-first-message-prompt\t''
device-ids-valid\t''
health-values\t''
numa-ids-valid\t''
message-size\t''
allocate-healthy\t''
allocate-unknown-id\t''
distinct-devices\t''
preferred-contract\t''
preferred-not-advertised\t''
prestart-deadline\t''
parallel-calls\t''
list-stream-stays-open\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l skip -d 'Leave out these checks (comma-separated names)' -r -f -a "options-answer\t''
list-first-message-prompt\t''
device-ids-valid\t''
health-values\t''
numa-ids-valid\t''
message-size\t''
allocate-healthy\t''
allocate-unknown-id\t''
distinct-devices\t''
preferred-contract\t''
preferred-not-advertised\t''
prestart-deadline\t''
parallel-calls\t''
list-stream-stays-open\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l junit -d 'Also write the results as JUnit XML to FILE (testsuite "dpctl plugin check")' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l register-options -d 'The options the plugin sends in its RegisterRequest, e.g. pre_start_required=true,get_preferred_allocation_available=false (keys left out are false, as in the message). The kubelet never reads them; options-answer notes where GetDevicePluginOptions differs' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l first-list-timeout -d 'How long the first ListAndWatch message may take (after registration, under smoke)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l stream-window -d 'How long the ListAndWatch stream must stay open after its first message (at least)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l prestart-timeout -d 'PreStartContainer deadline (the kubelet\'s is 30s)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l parallel -d 'How many concurrent calls parallel-calls makes' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l probe-unadvertised -d 'Call GetPreferredAllocation even when the plugin does not advertise it (preferred-not-advertised then says whether it answers). A kubelet never does, and a plugin may crash in a handler it never expects to run'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l stable -d 'Print only what two runs against the same plugin agree on (each check\'s name and outcome, the totals; no evidence, times or paths), as JSON (YAML with -o yaml), for diffing against a committed baseline'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l list -d 'List the checks (name and why it matters; -o wide adds the rule) and exit'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand plugin; and __fish_seen_subcommand_from check" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l dir -d 'The device-plugin directory: kubelet.sock, plugin sockets, the checkpoint' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l kubelet-socket-delay -d 'Report started at once but create kubelet.sock only this long after, as a kubelet whose device manager starts late: plugins that call Register once at start and give up never register (docs/kubelet-versions.md §10). A restart re-creates it just as late' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l grace-period -d 'After a ListAndWatch stream ends, how long capacity is kept before it drops to 0' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l podresources-socket -d 'Where to serve PodResources [default: <DIR>/pod-resources.sock]' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l registry-dir -d 'Also accept plugins through this plugins_registry directory (the plugin watcher\'s way)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l api-objects -d 'Serve these API objects (YAML or JSON: ResourceClaims, the Node, Pods, DeviceClasses, ResourceSlices) on loopback, as `dpctl apiserver` does, with its kubeconfig and record written in the kubelet\'s root (the parent of --registry-dir): point a helper-built DRA driver at ROOT/kubeconfig. `admit` looks the pod\'s claims up there; a claim given in the pod\'s manifest wins and is stored there first, so the driver reads the same claim' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l kubeconfig -d 'Read the claims `admit` looks up from this kubeconfig\'s API server instead of --api-objects (GET only, nothing written: no claim stored, no slice wiped). Plain HTTP only, e.g. `kubectl proxy` in front of a real cluster; an https:// server is refused' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l dra-wiping-delay -d 'With --api-objects: how long a DRA driver has to register again after its last instance went before the sim deletes its ResourceSlices (the kubelet\'s fixed 30 s)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l dial-timeout -d 'How long Register keeps dialing the plugin\'s socket before it fails' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l rpc-timeout -d 'Deadline of GetDevicePluginOptions, GetPreferredAllocation and Allocate (the kubelet sets none)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l kubelet-version -d 'The kubelet release to play: 1.26 … 1.38 or master (v1.30 and 1.30.7 mean 1.30). 1.38 is a pre-release (v1.38.0-beta.0), played only when named.' -r -f -a "1.26\t''
1.27\t''
1.28\t''
1.29\t''
1.30\t''
1.31\t''
1.32\t''
1.33\t''
1.34\t''
1.35\t''
1.36\t''
1.37\t''
1.38\t''
master\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l expect -d 'Expect RESOURCE to have exactly COUNT allocatable devices (repeatable); exit 0 once all hold' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l timeout -d 'Stop after this long [default: run until Ctrl-C; with --expect: 30s, then exit 1]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l topology-manager-policy -d 'The kubelet\'s --topology-manager-policy' -r -f -a "none\t'No hints are collected; devices are not aligned'
best-effort\t'Merge the hints, always admit'
restricted\t'Admit only a preferred hint'
single-numa-node\t'Admit only a preferred hint on one NUMA node (or none)'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l numa-nodes -d 'NUMA nodes of the simulated machine' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l topology-manager-scope -d 'The kubelet\'s --topology-manager-scope' -r -f -a "container\t'One hint per container, init containers first'
pod\t'One hint for the whole pod'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l topology-manager-policy-options -d 'The kubelet\'s --topology-manager-policy-options, e.g. prefer-closest-numa-nodes=true,max-allowable-numa-nodes=16' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l cpu-manager-policy -d 'The kubelet\'s --cpu-manager-policy (static: Guaranteed pods with integer CPU requests get exclusive CPUs)' -r -f -a "none\t'Every container in the shared pool; no CPU hints'
static\t'Guaranteed pods with integer CPU requests get exclusive CPUs'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l reserved-cpus -d 'The kubelet\'s --reserved-cpus (a CPU list, e.g. 0 or 0-1); the static policy needs at least one' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l cpus-per-numa -d 'CPUs per NUMA node (node n holds CPUs n*N .. n*N+N-1)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l numa-distances -d 'NUMA distances (rows by \';\', values by \',\'), needed by prefer-closest-numa-nodes, e.g. 10,21;21,10' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l engine -d 'Which kubelet serves --dir: sim (this process) or referee:PATH, the kubelet\'s own device manager, plugin manager, Topology Manager and PodResources server at --kubelet-version (a referee binary, or a directory of dpctl-referee-1.NN built by conformance/build.sh), run in a private mount namespace with --dir bound on /var/lib/kubelet/device-plugins. The steering commands (admit, delete, restart, restart-container, status) drive either' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l force -d 'Take over kubelet.sock (and the sim\'s other sockets) even when a live process answers on it, and delete every socket in --dir at start as a kubelet does. Without it (a deliberate difference from the kubelet) startup deletes only stale sockets (connecting is refused) and leaves live ones alone; `restart` deletes them all, like a restarting kubelet'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l no-podresources -d 'Do not serve PodResources'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l no-rate-limit -d 'Serve PodResources without the kubelet\'s rate limit (100 calls/s, burst 10)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l assume-claims-reserved -d 'A ResourceClaim in the pod\'s manifest without status.reservedFor counts as reserved for the pod (a convenience for hand-written manifests). Off by default, as the kubelet refuses to prepare a claim reserved for no pod: `pod <name> (<uid>) is not allowed to use ...`'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l no-checkpoint -d 'Do not read or write kubelet_internal_checkpoint'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l emulate-cleanup -d 'At start and restart, also delete the non-socket files the chosen kubelet deletes (1.26-1.32: every non-directory; 1.33+: symlinks to sockets). Without it only sockets are deleted and the rest is reported. The checkpoint is never deleted'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l adopt-checkpoint -d 'Let the sim rewrite a kubelet_internal_checkpoint it did not write (a real kubelet\'s). Without it such a file is read, verified and restored, never changed'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -f -a "admit" -d 'Admit a pod: from a Pod manifest (YAML or JSON; `-` reads stdin), or with --allocate for a one-container pod'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -f -a "delete" -d 'Delete a pod and free its devices'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -f -a "restart" -d 'Restart the kubelet: delete the sockets, serve a new kubelet.sock, keep allocations, admit every pod again with its containers still running (1.27+ skips running containers; a completed init container\'s devices need their plugin back), and report which plugins registered again and how fast. Exit 1 when a plugin is not back or a pod is rejected'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -f -a "reboot" -d 'Reboot the node: every container is gone, the checkpoint is kept, the kubelet starts on it (sockets deleted, a new kubelet.sock) and admits every pod again, one at a time; a pod admitted before its plugin is back fails with UnexpectedAdmissionError. Exit 1 when a pod is rejected'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -f -a "restart-container" -d 'Restart one container of an admitted pod: the kubelet calls PreStartContainer again (when the plugin requires it); a failure stops only that container. Exit 1 when it does not start'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -f -a "status" -d 'Show resources, plugins and pods'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and not __fish_seen_subcommand_from admit delete restart reboot restart-container status set-grace" -f -a "set-grace" -d 'Set the grace period after a stream end (e.g. 2s to watch capacity drop)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -l dir -d 'The directory the sim serves' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -s f -l filename -d 'The Pod manifest, as kubectl takes it (the same as MANIFEST)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -l allocate -d 'RESOURCE=COUNT for a one-container pod (repeatable)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -l name -d 'Pod name for --allocate [default: a generated one]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -l namespace -d 'Namespace for --allocate' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -l cpu -d 'CPU limit (= request) of the --allocate pod\'s container, e.g. 2 or 500m' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -l memory -d 'Memory limit (= request) of the --allocate pod\'s container, e.g. 1Gi; with --cpu the pod is Guaranteed' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -l dry-run -d 'Only judge the pod: would it be admitted, and where? Nothing is allocated, no plugin is called'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from admit" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from delete" -l dir -d 'The directory the sim serves' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from delete" -s n -l namespace -d 'Namespace' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from delete" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from delete" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from delete" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from delete" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from delete" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from delete" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from delete" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from delete" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart" -l dir -d 'The directory the sim serves' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart" -l wait -d 'How long to wait for plugins to come back' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart" -l readmit-after -d 'How long after the new kubelet.sock the pods are admitted again; plugins that register within it are back in time [default: 0s, before any plugin]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart" -l no-readmit -d 'Do not admit the pods again (they keep their devices unchecked): a sim-only choice, the kubelet always admits them again'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from reboot" -l dir -d 'The directory the sim serves' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from reboot" -l order -d 'Admit the pods again in this order (names or NAMESPACE/NAME, every admitted pod once) [default: admission order, as the kubelet\'s creation order]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from reboot" -l seed -d 'Admit the pods again in a random order made from SEED (reproducible)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from reboot" -l readmit-after -d 'How long after the new kubelet.sock the pods are admitted again; plugins that register within it are back in time [default: 0s, before any plugin]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from reboot" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from reboot" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from reboot" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from reboot" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from reboot" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from reboot" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from reboot" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from reboot" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart-container" -l dir -d 'The directory the sim serves' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart-container" -s n -l namespace -d 'Namespace' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart-container" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart-container" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart-container" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart-container" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart-container" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart-container" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart-container" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from restart-container" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from status" -l dir -d 'The directory the sim serves' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from status" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from status" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from status" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from status" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from status" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from status" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from status" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from set-grace" -l dir -d 'The directory the sim serves' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from set-grace" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from set-grace" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from set-grace" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from set-grace" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from set-grace" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from set-grace" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from set-grace" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand kubelet-sim; and __fish_seen_subcommand_from set-grace" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -f -a "list" -d 'Pods and what they hold: devices, NUMA nodes, CPUs, memory, DRA claims'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -f -a "get" -d 'One pod (v1 Get; kubelet 1.27+, feature gate KubeletPodResourcesGet)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -f -a "allocatable" -d 'What the kubelet can hand out: healthy devices, CPUs, memory (GetAllocatableResources)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -f -a "free" -d 'Allocatable minus in use, per resource and NUMA node; CPUs and memory too'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -f -a "watch" -d 'Poll List and print pods and assignments that appeared, changed or went away'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -f -a "dump" -d 'Record this node\'s List and GetAllocatableResources as a fixture file for `serve --data` (always JSON)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and not __fish_seen_subcommand_from list get allocatable free watch dump serve" -f -a "serve" -d 'Be a kubelet\'s PodResources endpoint, answering from a JSON fixture'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l socket -d 'The kubelet\'s PodResources socket' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l api -d 'API version' -r -f -a "auto\t'v1, falling back to v1alpha1 when the kubelet has no v1 (before 1.20)'
v1\t'Only v1'
v1alpha1\t'Only v1alpha1 (List only: devices without topology)'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l connect-timeout -d 'Limit for connecting to the socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l max-recv-bytes -d 'Largest answer accepted, in bytes [default: 16 MiB, as upstream clients]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s n -l namespace -d 'Only pods in this namespace [default: all]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l resource -d 'Only this resource: a device resource name (nvidia.com/gpu), `cpu`, a memory type (memory, hugepages-2Mi) or a DRA driver name' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l timeout -d 'Deadline of each call' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s A -l all-namespaces -d 'Every namespace (the default; as kubectl\'s -A)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s w -l watch -d 'After the list, watch for changes (as `watch`, every 2s, until Ctrl-C)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -s n -l namespace -d 'The pod\'s namespace [default: default, or the one in NAMESPACE/NAME]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l socket -d 'The kubelet\'s PodResources socket' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l api -d 'API version' -r -f -a "auto\t'v1, falling back to v1alpha1 when the kubelet has no v1 (before 1.20)'
v1\t'Only v1'
v1alpha1\t'Only v1alpha1 (List only: devices without topology)'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l connect-timeout -d 'Limit for connecting to the socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l max-recv-bytes -d 'Largest answer accepted, in bytes [default: 16 MiB, as upstream clients]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l timeout -d 'Deadline of each call' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from get" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l socket -d 'The kubelet\'s PodResources socket' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l api -d 'API version' -r -f -a "auto\t'v1, falling back to v1alpha1 when the kubelet has no v1 (before 1.20)'
v1\t'Only v1'
v1alpha1\t'Only v1alpha1 (List only: devices without topology)'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l connect-timeout -d 'Limit for connecting to the socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l max-recv-bytes -d 'Largest answer accepted, in bytes [default: 16 MiB, as upstream clients]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l timeout -d 'Deadline of each call' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from allocatable" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -l socket -d 'The kubelet\'s PodResources socket' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -l api -d 'API version' -r -f -a "auto\t'v1, falling back to v1alpha1 when the kubelet has no v1 (before 1.20)'
v1\t'Only v1'
v1alpha1\t'Only v1alpha1 (List only: devices without topology)'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -l connect-timeout -d 'Limit for connecting to the socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -l max-recv-bytes -d 'Largest answer accepted, in bytes [default: 16 MiB, as upstream clients]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -l resource -d 'Only this resource (device resource name, `cpu`, or memory type)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -l cpus-per-numa -d 'Free CPUs per NUMA node, node n holding CPUs n*N..n*N+N-1 (as `kubelet-sim --cpus-per-numa N` lays them out); PodResources does not say which node a CPU is on' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -l timeout -d 'Deadline of each call' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from free" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -l socket -d 'The kubelet\'s PodResources socket' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -l api -d 'API version' -r -f -a "auto\t'v1, falling back to v1alpha1 when the kubelet has no v1 (before 1.20)'
v1\t'Only v1'
v1alpha1\t'Only v1alpha1 (List only: devices without topology)'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -l connect-timeout -d 'Limit for connecting to the socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -l max-recv-bytes -d 'Largest answer accepted, in bytes [default: 16 MiB, as upstream clients]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -s n -l namespace -d 'Only pods in this namespace [default: all]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -l resource -d 'Only this resource: a device resource name (nvidia.com/gpu), `cpu`, a memory type (memory, hugepages-2Mi) or a DRA driver name' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -l interval -d 'Time between polls (at least 10ms, the kubelet\'s rate)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -l count -d 'Stop after this many events (pods present at the start count)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -l timeout -d 'Stop after this long [default: until Ctrl-C]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -s A -l all-namespaces -d 'Every namespace (the default; as kubectl\'s -A)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -l no-initial -d 'Do not print the pods present at the start; only changes'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from watch" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from dump" -l socket -d 'The kubelet\'s PodResources socket' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from dump" -l api -d 'API version' -r -f -a "auto\t'v1, falling back to v1alpha1 when the kubelet has no v1 (before 1.20)'
v1\t'Only v1'
v1alpha1\t'Only v1alpha1 (List only: devices without topology)'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from dump" -l connect-timeout -d 'Limit for connecting to the socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from dump" -l max-recv-bytes -d 'Largest answer accepted, in bytes [default: 16 MiB, as upstream clients]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from dump" -l timeout -d 'Deadline of each call' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from dump" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from dump" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from dump" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from dump" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from dump" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from dump" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from dump" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from dump" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -l socket -d 'The socket to serve on (a real kubelet uses /var/lib/kubelet/pod-resources/kubelet.sock)' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -l data -d 'The fixture file [default: an empty node]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -l qps -d 'Rate limit: calls per second, 0.001 to 1000000 (for no limit, use --no-rate-limit)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -l burst -d 'Rate limit: burst, 1 to 1000000' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -l apis -d 'API versions to serve, comma-separated (`--apis v1alpha1` is a kubelet older than 1.20)' -r -f -a "v1\t'`v1.PodResourcesLister`'
v1alpha1\t'`v1alpha1.PodResourcesLister`'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -l disable-get -d 'Answer Get like a kubelet with the feature gate KubeletPodResourcesGet off'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -l no-rate-limit -d 'Do not rate-limit (a kubelet allows 100 calls/s, burst 10)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -l force -d 'Take the socket over even if a live process serves it'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand podresources; and __fish_seen_subcommand_from serve" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -s c -l config -d 'TOML config: resources, devices, answers, timeline, faults (see examples/)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l dir -d 'The device-plugin directory [default: $DPCTL_DEVICE_PLUGIN_DIR, else /var/lib/kubelet/device-plugins]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l resource -d 'Extended resource name; repeat for several resources with the same flags' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l endpoint -d 'Socket file name in --dir [default: from the resource: example.com/gpu gives example-gpu.sock]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l devices -d 'Number of devices [default: 4; at most 100,000]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l id-prefix -d 'Prefix of device IDs [default: the resource\'s last part upper-cased, e.g. GPU-]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l numa-nodes -d 'Spread devices over N NUMA nodes (0: no topology)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l unhealthy -d 'Devices that start unhealthy, comma-separated' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l preferred -d 'Advertise GetPreferredAllocation, answering with POLICY (first-fit, pack, spread, random). Without it the RPC is still answered, first-fit' -r -f -a "first-fit\t''
pack\t''
spread\t''
random\t''
ignore-numa\t''
lowest\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l seed -d 'Seed of the random policy' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l env -d 'Allocate answer env var; {ids}, {id}, {index}, {count}, {resource} are substituted' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l cdi -d 'Allocate answer CDI device name, e.g. example.com/gpu={id} (one per device)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l flap -d 'Toggle devices\' health every PERIOD, e.g. GPU-2:500ms or GPU-1,GPU-2:1s' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l error -d 'Fault: answer RPC with an error status, e.g. \'Allocate=unavailable:driver gone\'' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l latency -d 'Fault: delay the answer to RPC, e.g. PreStartContainer=2s' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l fail-after -d 'Fault: RPC works N times, then fails (with its --error, else internal)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l end-stream-after -d 'Fault: end each ListAndWatch stream after N messages' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l end-stream-error -d 'Fault: with --end-stream-after, end with this status instead of OK' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l register-version -d 'Fault: send this version in Register (e.g. v1alpha)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l register-resource-name -d 'Fault: send this resource name in Register (e.g. an invalid one)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l crash-after-restart -d 'Fault: exit with Go\'s `panic: send on closed channel` DURATION after a kubelet restart' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l scan-stops-after -d 'Fault: report the first N changes in device count (add-device, remove-device), never a later one' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l registry-dir -d 'Also register the plugin-watcher way: serve pluginregistration.Registration on DIR/<endpoint> (e.g. /var/lib/kubelet/plugins_registry)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l record -d 'Write every RPC received to FILE as JSON Lines. FILE is created, or replaced when it is empty or a record dpctl wrote; any other existing file, a symbolic link (live or dangling) or a non-regular file is refused (exit 2), never emptied or followed' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l register-timeout -d 'Deadline of one Register call' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l run-for -d 'Stop after this long (for scripts and CI)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l pre-start -d 'Advertise pre_start_required'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l refuse-unhealthy -d 'Refuse Allocate of unhealthy devices (InvalidArgument)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l oversize-list -d 'Fault: pad every ListAndWatch message over the kubelet\'s 4 MiB limit'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l empty-first-message -d 'Fault: send an empty device list first on every ListAndWatch stream, then the real one'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l same-device -d 'Fault: answer every Allocate with the first device\'s content (env, CDI names, device nodes, mounts), whatever was asked: two containers get the same device'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l register-options-mismatch -d 'Fault: send the opposite options in Register from GetDevicePluginOptions (kubelets ignore them, so this works: smoke and kubelet-sim only note it)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l register-before-serving -d 'Fault: call Register before serving the socket (the classic bug)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l no-reregister -d 'Fault: do not serve or register again after a kubelet restart'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l stale-stream-after-restart -d 'Fault: after a kubelet restart, the new ListAndWatch stream gets the list once and never a change (the old stream\'s goroutine kept the update channel)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l hang-on-sigterm -d 'Fault: ignore SIGTERM and Ctrl-C (only SIGKILL ends it)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l ids-change-per-start -d 'Fault: device IDs differ on every start (a suffix made from the process and its start time)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l register-twice -d 'Fault: call Register twice on the same socket (kubelets 1.37+ refuse the second)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l register-once -d 'Fault: call Register once at start and exit if it fails (no retry, no watching for kubelet.sock)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l no-register -d 'Only serve; never call Register on kubelet.sock'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l no-control -d 'Do not serve the control socket (<dir>/.dpctl/<resource>.sock)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l force -d 'Take the sockets over even if a live process serves them'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l hide-rpcs -d 'Do not show each RPC as an event (less work under heavy load; --record still gets them)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -f -a "set-health" -d 'Set the health of devices; the plugin sends a new ListAndWatch list'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -f -a "add-device" -d 'Add devices'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -f -a "remove-device" -d 'Remove devices'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and not __fish_seen_subcommand_from set-health add-device remove-device status" -f -a "status" -d 'Show a running mock\'s devices, registration and call counts'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from set-health" -l dir -d 'The device-plugin directory the mock serves in' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from set-health" -l timeout -d 'How long to wait for the mock to answer' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from set-health" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from set-health" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from set-health" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from set-health" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from set-health" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from set-health" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from set-health" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from set-health" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from add-device" -l dir -d 'The device-plugin directory the mock serves in' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from add-device" -l timeout -d 'How long to wait for the mock to answer' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from add-device" -l health -d 'Their health' -r -f -a "healthy\t''
unhealthy\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from add-device" -l numa -d 'Their NUMA nodes, comma-separated (none: no topology)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from add-device" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from add-device" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from add-device" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from add-device" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from add-device" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from add-device" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from add-device" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from add-device" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from remove-device" -l dir -d 'The device-plugin directory the mock serves in' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from remove-device" -l timeout -d 'How long to wait for the mock to answer' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from remove-device" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from remove-device" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from remove-device" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from remove-device" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from remove-device" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from remove-device" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from remove-device" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from remove-device" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from status" -l dir -d 'The device-plugin directory the mock serves in' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from status" -l timeout -d 'How long to wait for the mock to answer' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from status" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from status" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from status" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from status" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from status" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from status" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand mock-plugin; and __fish_seen_subcommand_from status" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -f -a "info" -d 'GetInfo on a driver\'s registration socket, judged as the kubelet does; each advertised service probed on the endpoint (an empty NodePrepareResources; the first health message)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -f -a "prepare" -d 'NodePrepareResources for the claims named, as the kubelet sends it; the answer judged'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -f -a "unprepare" -d 'NodeUnprepareResources for the claims named; the answer judged'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -f -a "watch-health" -d 'Stream NodeWatchResources: each message is the driver\'s full device health list'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -f -a "check" -d 'Judge a driver end to end: registration, advertised vs served, socket paths, Prepare by the kubelet\'s rules and again (idempotent), CDI IDs, request names, Unprepare twice, call times. Prepares and unprepares one claim of its own: use a test driver'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -f -a "mock" -d 'Be a DRA driver: register on plugins_registry, prepare claims, write CDI specs, stream health; misbehave on request (--fault, --prepare-delay, --prepare-error ...)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and not __fish_seen_subcommand_from info prepare unprepare watch-health check mock smoke" -f -a "smoke" -d 'CI for a DRA driver: run it unmodified against a fresh kubelet-sim (the DRA manager) and API server, take it through registration, slices, pods with claims, a kubelet restart, a reboot with the CDI directory wiped, parallel pods and long socket paths; table, JSON or JUnit'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l registration -d 'The driver\'s registration socket' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l driver -d 'The driver name: its registration socket is <REGISTRY_DIR>/<NAME>-reg.sock' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l registry-dir -d 'The kubelet\'s plugin registration directory' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l connect-timeout -d 'Limit for connecting to each socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from info" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l socket -d 'The driver\'s service socket (its registered endpoint)' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l registration -d 'The driver\'s registration socket' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l driver -d 'The driver name: its registration socket is <REGISTRY_DIR>/<NAME>-reg.sock' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l registry-dir -d 'The kubelet\'s plugin registration directory' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l connect-timeout -d 'Limit for connecting to each socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l api -d 'The node service [default: what a 1.34+ kubelet picks from GetInfo; v1 with --socket]' -r -f -a "v1\t'k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin (kubelet 1.34+)'
v1beta1\t'k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin (kubelet 1.32+)'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l claim -d 'A claim as NAMESPACE/NAME/UID (or NAME/UID in default); repeat for more' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l claims -d 'A JSON or YAML file with a list of {namespace, name, uid}' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l timeout -d 'Deadline of the call [default: the kubelet\'s 45s]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l cdi-dir -d 'CDI spec directory to resolve the answered IDs in; repeat [default: /etc/cdi, /var/run/cdi, and the cdi/ beside plugins_registry when it exists, as on a node kubelet-sim made]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l kubeconfig -d 'The kubeconfig of the driver\'s API server: when the driver says a claim "got replaced", the error names the UID the API holds it under' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l no-cdi-check -d 'Do not resolve CDI IDs (they are still parsed)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from prepare" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l socket -d 'The driver\'s service socket (its registered endpoint)' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l registration -d 'The driver\'s registration socket' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l driver -d 'The driver name: its registration socket is <REGISTRY_DIR>/<NAME>-reg.sock' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l registry-dir -d 'The kubelet\'s plugin registration directory' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l connect-timeout -d 'Limit for connecting to each socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l api -d 'The node service [default: what a 1.34+ kubelet picks from GetInfo; v1 with --socket]' -r -f -a "v1\t'k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin (kubelet 1.34+)'
v1beta1\t'k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin (kubelet 1.32+)'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l claim -d 'A claim as NAMESPACE/NAME/UID (or NAME/UID in default); repeat for more' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l claims -d 'A JSON or YAML file with a list of {namespace, name, uid}' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l timeout -d 'Deadline of the call [default: the kubelet\'s 45s]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l cdi-dir -d 'CDI spec directory to resolve the answered IDs in; repeat [default: /etc/cdi, /var/run/cdi, and the cdi/ beside plugins_registry when it exists, as on a node kubelet-sim made]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l kubeconfig -d 'The kubeconfig of the driver\'s API server: when the driver says a claim "got replaced", the error names the UID the API holds it under' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l no-cdi-check -d 'Do not resolve CDI IDs (they are still parsed)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from unprepare" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -l socket -d 'The driver\'s service socket (its registered endpoint)' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -l registration -d 'The driver\'s registration socket' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -l driver -d 'The driver name: its registration socket is <REGISTRY_DIR>/<NAME>-reg.sock' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -l registry-dir -d 'The kubelet\'s plugin registration directory' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -l connect-timeout -d 'Limit for connecting to each socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -l api -d 'The health service [default: what a 1.37 kubelet picks from GetInfo; v1alpha1 with --socket]' -r -f -a "v1alpha1\t'v1alpha1.DRAResourceHealth (kubelet 1.34+)'
v1\t'v1.DRAResourceHealth (kubelet 1.37+)'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -l count -d 'Stop after this many messages' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -l timeout -d 'Stop after this long [default: until stopped]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from watch-health" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -l registration -d 'The driver\'s registration socket' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -l driver -d 'The driver name: its registration socket is <REGISTRY_DIR>/<NAME>-reg.sock' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -l registry-dir -d 'The kubelet\'s plugin registration directory' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -l connect-timeout -d 'Limit for connecting to each socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -l claim -d 'The claim to prepare and unprepare [default: one created with --kubeconfig, else dpctl-check/dpctl-check/<random UID>]. Refused (exit 2) when a pod holds it in the kubelet\'s dra_manager_state' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -l kubeconfig -d 'The kubeconfig of the API server the driver uses (plain HTTP: dpctl apiserver\'s, or kubelet-sim --api-objects\' ROOT/kubeconfig). Check creates a ResourceClaim there, allocated a device the driver publishes, prepares it, and deletes it afterwards: what a driver on the kubeletplugin helper needs, since it reads every claim from the API' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -l kubelet-root -d 'The kubelet root whose dra_manager_state names the claims pods hold [default: the parent of the registry directory]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -l cdi-dir -d 'CDI spec directory to resolve the answered IDs in; repeat [default: /etc/cdi, /var/run/cdi, and <KUBELET_ROOT>/cdi when it exists, the /var/run/cdi of a node kubelet-sim made]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -l timeout -d 'Deadline of each call [default: the kubelet\'s 45s]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from check" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l dir -d 'The kubelet root directory the sockets go under' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l cdi-dir -d 'Where CDI specs go [default: <DIR>/plugins/<DRIVER>/cdi]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l service -d 'A service to advertise, in order: v1, v1beta1, health-v1alpha1, health-v1 (or the advertised string); repeat [default: v1, v1beta1, health-v1alpha1, as the kubeletplugin helper]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l devices -d 'How many devices' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l devices-per-claim -d 'Devices each claim gets' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l pool -d 'The pool name' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l request-name -d 'request_names of every device answered; repeat [default: none, i.e. all requests]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l unhealthy -d 'A device reported Unhealthy on the health stream; repeat' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l health-interval -d 'Health stream period' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l fault -d 'What to break; repeat' -r -f -a "missing-uid\t'The first claim of each Prepare is left out'
not-idempotent\t'A claim prepared again gets other devices'
unresolvable-cdi\t'CDI IDs answered, no spec written'
bad-cdi-id\t'CDI IDs that do not parse'
health-unserved\t'Health advertised, not served'
register-once\t'GetInfo answered once: no registration after a kubelet restart'
same-device\t'Every claim answered with the first device'
no-device\t'Every claim answered with no device and no error'
unpublished-device\t'Every claim answered with a device no ResourceSlice publishes'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l prepare-delay -d 'Wait this long before answering each Prepare' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l prepare-error -d 'Answer every claim of Prepare with this error' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l prepare-status -d 'Fail Prepare as a whole with this gRPC code (e.g. unavailable)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l unprepare-error -d 'Answer every claim of Unprepare with this error' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l record -d 'Write every call as a JSON line to FILE (only an empty file or a record dpctl wrote is replaced)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l device-node -d 'The host device node each device\'s CDI entry adds, e.g. /dev/gpu{index} ({index}: the device\'s number, {device}: its name) [default: none, env only]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l kubeconfig -d 'Use the API server of this kubeconfig (plain HTTP: `dpctl apiserver`\'s, or kubelet-sim --api-objects\' ROOT/kubeconfig) as a helper-built driver does: publish the pool as a ResourceSlice of --node-name, and prepare the devices each claim\'s allocation names (the claim GET first; the helper\'s errors for a missing, unallocated or replaced claim)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l node-name -d 'The node the mock runs on (its Node must be in the API; needs --kubeconfig)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from mock" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l driver -d 'The driver to test when several register [default: the first]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l kubelet-version -d 'The kubelet releases whose DRA manager kubelet-sim plays (1.34 or later), one run each: comma-separated, or a range (1.34-1.38 or 1.34..1.38). 1.38 is a pre-release (v1.38.0-beta.0), played only when named.' -r -f -a "1.26\t''
1.27\t''
1.28\t''
1.29\t''
1.30\t''
1.31\t''
1.32\t''
1.33\t''
1.34\t''
1.35\t''
1.36\t''
1.37\t''
1.38\t''
master\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l register-timeout -d 'How long the driver may take to start and register (also again after a restart)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l slice-timeout -d 'How long to wait for the driver\'s first ResourceSlice' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l timeout -d 'Deadline of each Prepare and Unprepare: the kubelet\'s 45s, or lower' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l parallel -d 'Pods admitted at once in parallel-pods' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l grace -d 'How long the driver may take to exit after SIGTERM before it gets SIGKILL' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l skip -d 'Leave out these steps (comma-separated): published-slices, request-names, prepare-idempotent, kubelet-restart, node-reboot, parallel-pods, distinct-devices, rolling-update, long-socket-path' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l junit -d 'Also write the report as JUnit XML to FILE (testsuite "dpctl dra smoke")' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l log-dir -d 'Write the driver\'s whole output to DIR/plugin.stdout.log and DIR/plugin.stderr.log' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l engine -d 'What plays the node: `sim` (kubelet-sim and dpctl\'s API server; no root), or `cluster:DIR`, a one-node cluster: etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kubectl from DIR (conformance/build.sh cluster), the real kubelet with containerd and runc, in a private mount namespace (root; docs/cluster.md)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l rolling -d 'Start a second instance ({instance} = 2) beside the first: a rolling update'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l stable -d 'Print only what two runs of the same driver agree on (per release: each step\'s name and outcome, the totals), as JSON (YAML with -o yaml), for diffing against a committed baseline'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l keep -d 'Keep the fresh kubelet root afterwards (checkpoint, CDI specs, API server record)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand dra; and __fish_seen_subcommand_from smoke" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -l dir -d 'Directory for the record (and the kubeconfig); created if missing' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -l objects -d 'The objects to serve: a JSON or YAML file of Kubernetes objects' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -l listen -d 'Address to listen on: loopback only; port 0 lets the OS pick one' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -l kubeconfig-out -d 'Where to write the kubeconfig [default: DIR/kubeconfig]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -f -a "slices" -d 'The ResourceSlices as they stand in DIR\'s record (running or stopped server)'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and not __fish_seen_subcommand_from slices writes" -f -a "writes" -d 'Every write recorded in DIR, in order'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from slices" -l dir -d 'The directory `dpctl apiserver --dir` used' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from slices" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from slices" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from slices" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from slices" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from slices" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from slices" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from slices" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from slices" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from writes" -l dir -d 'The directory `dpctl apiserver --dir` used' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from writes" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from writes" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from writes" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from writes" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from writes" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from writes" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from writes" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand apiserver; and __fish_seen_subcommand_from writes" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l dir -d 'Use this device-plugin directory instead of a fresh one under /tmp (it is kept; only the sim\'s sockets are removed)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l resource -d 'The resource to test when the plugin registers several [default: the first to register]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l register-timeout -d 'How long the plugin may take to start and register' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l first-list-timeout -d 'How long the first ListAndWatch message may take (after registration, under smoke)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l stream-window -d 'How long the ListAndWatch stream must stay open after its first message (at least)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l prestart-timeout -d 'PreStartContainer deadline (the kubelet\'s is 30s)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l request -d 'Devices the test pod asks for (0: no pod)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l restart-deadline -d 'How long after a kubelet restart the plugin may take to register again' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l restarts -d 'Restart the kubelet N times in the kubelet-restart step; the step reports how many the plugin came back from, e.g. "re-registered 29/30 (3.3% flaky)", and fails on any miss' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l fault-command -d 'health-recovery: shell command (sh -c, {dir} and {kubelet_socket} replaced, the plugin\'s environment) that makes a device fail; with dpctl\'s mock plugin none is needed' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l recover-command -d 'health-recovery: shell command that clears the fault --fault-command made' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l late-kubelet-socket -d 'Create kubelet.sock only this long after the sim has started (the plugin starts before it, as on a node whose kubelet is slow to start its device manager): a plugin must retry Register or watch for kubelet.sock' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l recovery-deadline -d 'health-recovery: how long the fault may take to show, and its clearance to restore allocatable' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l settle -d 'How long the same plugin process is watched after a kubelet restart and after a node reboot before the steps on it are judged: a process that exits (a panic some seconds after the restart) within it fails the step' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l topology-manager-policy -d 'Admit the test pod under this Topology Manager policy (the kubelet\'s --topology-manager-policy)' -r -f -a "none\t'No hints are collected; devices are not aligned'
best-effort\t'Merge the hints, always admit'
restricted\t'Admit only a preferred hint'
single-numa-node\t'Admit only a preferred hint on one NUMA node (or none)'"
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l numa-nodes -d 'NUMA nodes of the simulated machine (devices on other nodes never align)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l grace -d 'How long the plugin may take to exit after SIGTERM before it gets SIGKILL' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l only -d 'Run only these steps and checks (comma-separated names; see below); launch, registration and shutdown always run' -r -f -a "launch\t''
registration\t''
registration-request\t''
first-snapshot\t''
health-report\t''
admission\t''
pod-deletion\t''
kubelet-restart\t''
health-recovery\t''
device-rescan\t''
node-reboot\t''
plugin-restart\t''
shutdown\t''
options-answer\t''
list-first-message-prompt\t''
device-ids-valid\t''
health-values\t''
numa-ids-valid\t''
message-size\t''
allocate-healthy\t''
allocate-unknown-id\t''
distinct-devices\t''
preferred-contract\t''
preferred-not-advertised\t''
prestart-deadline\t''
parallel-calls\t''
list-stream-stays-open\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l skip -d 'Leave out these steps or checks (comma-separated names; see below)' -r -f -a "registration-request\t''
first-snapshot\t''
health-report\t''
admission\t''
pod-deletion\t''
kubelet-restart\t''
health-recovery\t''
device-rescan\t''
node-reboot\t''
plugin-restart\t''
options-answer\t''
list-first-message-prompt\t''
device-ids-valid\t''
health-values\t''
numa-ids-valid\t''
message-size\t''
allocate-healthy\t''
allocate-unknown-id\t''
distinct-devices\t''
preferred-contract\t''
preferred-not-advertised\t''
prestart-deadline\t''
parallel-calls\t''
list-stream-stays-open\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l junit -d 'Also write the report as JUnit XML to FILE (testsuite "dpctl smoke")' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l log-dir -d 'Write each plugin process\'s whole output to DIR/STEP.stdout.log and DIR/STEP.stderr.log, STEP being the step that started it (launch, node-reboot, plugin-restart); the report keeps the last 64 KiB of each' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l bind -d 'With --isolate: also bind-mount SRC (a host path) at DST inside the namespace, e.g. a CDI spec directory, a fake /dev tree or a config file (repeatable)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l registration -d 'How the plugin must register: on kubelet.sock, through plugins_registry (the plugin watcher\'s GetInfo), or auto (whichever it does; the report says which)' -r -f -a "auto\t''
kubelet-sock\t''
plugins-registry\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l kubelet-version -d 'The kubelet release(s) to play, comma-separated (1.26 … 1.38 or master) or a range (1.28-1.38 or 1.28..1.38: every release in between): the whole smoke runs once per release, and the report says which ones the plugin passes. 1.38 is a pre-release (v1.38.0-beta.0), played only when named.' -r -f -a "1.26\t''
1.27\t''
1.28\t''
1.29\t''
1.30\t''
1.31\t''
1.32\t''
1.33\t''
1.34\t''
1.35\t''
1.36\t''
1.37\t''
1.38\t''
master\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l engine -d 'Which kubelet the plugin meets: sim (kubelet-sim, in-process) or referee:PATH, the kubelet\'s own device manager, plugin manager and Topology Manager at one release (a referee binary, or a directory of dpctl-referee-1.NN binaries built by conformance/build.sh: with a directory, --kubelet-version picks dpctl-referee-1.NN per release). The referee runs in a private mount namespace on the kubelet\'s standard paths (see below). kubelet:PATH: a real kubelet (a binary, or a directory of kubelet-1.NN built by conformance/build.sh kubelet, with pause.tar and busybox.tar beside it) with containerd and runc, as root, in private namespaces: pods run as real containers and each one is checked from inside for what the plugin\'s Allocate promised' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l keep -d 'Keep the fresh directory afterwards (checkpoint, leftover sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l stable -d 'Print only what two runs of the same plugin agree on (per release: each step\'s name and outcome, the totals; no evidence, pids, paths or times), as JSON (YAML with -o yaml), for diffing against a committed baseline'
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l show-output -d 'Copy the plugin\'s output to stderr as it runs'
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l isolate -d 'Run the plugin unmodified in a private mount namespace where the sim\'s fresh directories are bind-mounted at /var/lib/kubelet/device-plugins, /var/lib/kubelet/plugins_registry and /var/lib/kubelet/pod-resources (the host\'s mounts never change; see below)'
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand smoke" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and not __fish_seen_subcommand_from run diff" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and not __fish_seen_subcommand_from run diff" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and not __fish_seen_subcommand_from run diff" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and not __fish_seen_subcommand_from run diff" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and not __fish_seen_subcommand_from run diff" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and not __fish_seen_subcommand_from run diff" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and not __fish_seen_subcommand_from run diff" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and not __fish_seen_subcommand_from run diff" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and not __fish_seen_subcommand_from run diff" -f -a "run" -d 'Run scenarios on one engine; show what was observed after each step'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and not __fish_seen_subcommand_from run diff" -f -a "diff" -d 'Run scenarios on kubelet-sim and on a referee or a real kubelet; show every difference'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from run" -l engine -d 'sim (kubelet-sim, in-process) or referee:PATH (a referee binary, or a directory of dpctl-referee-1.NN binaries built by conformance/build.sh)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from run" -l kubelet-version -d 'Only these releases of each scenario\'s, comma-separated (e.g. 1.34,1.37) or a range (1.34-1.38) [default: each scenario\'s]. 1.38 is a pre-release (v1.38.0-beta.0), played only when named.' -r -f -a "1.26\t''
1.27\t''
1.28\t''
1.29\t''
1.30\t''
1.31\t''
1.32\t''
1.33\t''
1.34\t''
1.35\t''
1.36\t''
1.37\t''
1.38\t''
master\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from run" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from run" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from run" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from run" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from run" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from run" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from run" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from diff" -l referee -d 'A directory of dpctl-referee-1.NN binaries (conformance/build.sh), or one binary (the same as --engine referee:PATH)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from diff" -l engine -d 'What kubelet-sim is compared with: referee:PATH, or kubelet:PATH (a real kubelet, conformance/build.sh kubelet; root, containerd and runc): only the scenarios static pods can express run there, the others are listed as skipped with the reason' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from diff" -l kubelet-version -d 'Only these releases of each scenario\'s, comma-separated or a range (1.34-1.38) [default: each scenario\'s]. 1.38 is a pre-release (v1.38.0-beta.0), played only when named.' -r -f -a "1.26\t''
1.27\t''
1.28\t''
1.29\t''
1.30\t''
1.31\t''
1.32\t''
1.33\t''
1.34\t''
1.35\t''
1.36\t''
1.37\t''
1.38\t''
master\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from diff" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from diff" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from diff" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from diff" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from diff" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from diff" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from diff" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand scenario; and __fish_seen_subcommand_from diff" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l pace -d 'Pause after each step [default: 300ms when stdout is a terminal, else 0]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l deadline -d 'How long any one wait may take (registration, the health change, the restart)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand demo" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and not __fish_seen_subcommand_from show verify" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and not __fish_seen_subcommand_from show verify" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and not __fish_seen_subcommand_from show verify" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and not __fish_seen_subcommand_from show verify" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and not __fish_seen_subcommand_from show verify" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and not __fish_seen_subcommand_from show verify" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and not __fish_seen_subcommand_from show verify" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and not __fish_seen_subcommand_from show verify" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and not __fish_seen_subcommand_from show verify" -f -a "show" -d 'Pods, containers, resources, devices per NUMA node, each stored Allocate answer decoded, and the registered devices'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and not __fish_seen_subcommand_from show verify" -f -a "verify" -d 'Stored against computed checksum, and what it means for the next kubelet start; exit 1 when the kubelet would call the file corrupt'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from show" -l dir -d 'The device-plugin directory' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from show" -l root -d 'Prefix of the host path --dir (the host\'s / as mounted in a pod, e.g. /host)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from show" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from show" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from show" -l dra -d 'The DRA manager\'s checkpoint [default file: dra_manager_state in the parent of --dir]'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from show" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from show" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from show" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from show" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from show" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from verify" -l dir -d 'The device-plugin directory' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from verify" -l root -d 'Prefix of the host path --dir (the host\'s / as mounted in a pod, e.g. /host)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from verify" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from verify" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from verify" -l dra -d 'The DRA manager\'s checkpoint [default file: dra_manager_state in the parent of --dir]'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from verify" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from verify" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from verify" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from verify" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from verify" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand checkpoint; and __fish_seen_subcommand_from verify" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l root -d 'Prefix of every host path (the host\'s / as mounted in a pod, e.g. /host)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l dir -d 'The device-plugin directory (a host path)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l podresources-socket -d 'The kubelet\'s PodResources socket (a host path) [default: <kubelet root>/pod-resources/kubelet.sock]' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l registry-dir -d 'The plugin watcher\'s directory (a host path) [default: <kubelet root>/plugins_registry]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l kubelet-root-dir -d 'The kubelet\'s --root-dir (a host path) [default: read from the running kubelet\'s command line in <root>/proc, else /var/lib/kubelet]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l cdi-dir -d 'CDI spec directories (host paths; repeatable) [default: /etc/cdi, /var/run/cdi]' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l timeout -d 'Deadline of each probe (connect, one call, the first ListAndWatch message)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l budget -d 'Total time for the whole run' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l node -d 'Name of this node, recorded in the report (a DaemonSet sets it from spec.nodeName)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l kubelet-version -d 'The kubelet release to judge files and the checkpoint by: 1.26 … 1.38 or master. 1.38 is a pre-release (v1.38.0-beta.0), played only when named.' -r -f -a "1.26\t''
1.27\t''
1.28\t''
1.29\t''
1.30\t''
1.31\t''
1.32\t''
1.33\t''
1.34\t''
1.35\t''
1.36\t''
1.37\t''
1.38\t''
master\t''"
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l every -d 'Run again every DURATION until stopped (one report per run; one JSON line each with -o json)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and not __fish_seen_subcommand_from merge" -f -a "merge" -d 'Fold many nodes\' `dpctl doctor -o json` reports (e.g. `kubectl logs -l ... --tail=1`) into one view: a row per node, then every warning and error with its node; exit 1 when any node has an error'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and __fish_seen_subcommand_from merge" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and __fish_seen_subcommand_from merge" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and __fish_seen_subcommand_from merge" -l all -d 'Also list the findings that are ok'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and __fish_seen_subcommand_from merge" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and __fish_seen_subcommand_from merge" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and __fish_seen_subcommand_from merge" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and __fish_seen_subcommand_from merge" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and __fish_seen_subcommand_from merge" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand doctor; and __fish_seen_subcommand_from merge" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand explain" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand explain" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand explain" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand explain" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand explain" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand explain" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand explain" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand explain" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred options prestart list" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred options prestart list" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred options prestart list" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred options prestart list" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred options prestart list" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred options prestart list" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred options prestart list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred options prestart list" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred options prestart list" -f -a "allocate" -d 'Load Allocate (one container request per call)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred options prestart list" -f -a "preferred" -d 'Load GetPreferredAllocation (every healthy device available)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred options prestart list" -f -a "options" -d 'Load GetDevicePluginOptions'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred options prestart list" -f -a "prestart" -d 'Load PreStartContainer'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and not __fish_seen_subcommand_from allocate preferred options prestart list" -f -a "list" -d 'Measure ListAndWatch: open -> first message decoded; with --churn, a health change -> the message carrying it decoded'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l socket -d 'The plugin\'s socket' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l dir -d 'The device-plugin directory (with --endpoint)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l endpoint -d 'The plugin\'s socket name in --dir, as it registers it (e.g. nvidia-gpu.sock)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l timeout -d 'Deadline of the call; for `watch`, how long to watch [default: 10s; watch: until stopped]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l connect-timeout -d 'Limit for connecting to the socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l max-recv-bytes -d 'Largest message accepted [default: the kubelet\'s 4 MiB]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l concurrency -d 'Requests in flight at most (1 to 1,000)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l connections -d 'HTTP/2 connections the requests share' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l duration -d 'How long to measure [default: 10s]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l total -d 'Measure this many requests instead of a duration' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l rate -d 'Open-loop arrival rate in requests per second (see below)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l warmup -d 'Load run first and not measured' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l devices-per-request -d 'Devices per Allocate / PreStartContainer request; the size asked of GetPreferredAllocation' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l compare -d 'A second plugin socket: both are loaded alternately (A, B, A, B) and the ratio B/A is printed' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l fail-if -d 'Fail (exit 1) when a condition holds, e.g. \'p99>5ms\', \'errors>0\', \'throughput<20000\'. Metrics: p50 p90 p99 p99.9 max mean errors violations throughput. Repeatable' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from allocate" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l socket -d 'The plugin\'s socket' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l dir -d 'The device-plugin directory (with --endpoint)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l endpoint -d 'The plugin\'s socket name in --dir, as it registers it (e.g. nvidia-gpu.sock)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l timeout -d 'Deadline of the call; for `watch`, how long to watch [default: 10s; watch: until stopped]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l connect-timeout -d 'Limit for connecting to the socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l max-recv-bytes -d 'Largest message accepted [default: the kubelet\'s 4 MiB]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l concurrency -d 'Requests in flight at most (1 to 1,000)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l connections -d 'HTTP/2 connections the requests share' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l duration -d 'How long to measure [default: 10s]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l total -d 'Measure this many requests instead of a duration' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l rate -d 'Open-loop arrival rate in requests per second (see below)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l warmup -d 'Load run first and not measured' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l devices-per-request -d 'Devices per Allocate / PreStartContainer request; the size asked of GetPreferredAllocation' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l compare -d 'A second plugin socket: both are loaded alternately (A, B, A, B) and the ratio B/A is printed' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l fail-if -d 'Fail (exit 1) when a condition holds, e.g. \'p99>5ms\', \'errors>0\', \'throughput<20000\'. Metrics: p50 p90 p99 p99.9 max mean errors violations throughput. Repeatable' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from preferred" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l socket -d 'The plugin\'s socket' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l dir -d 'The device-plugin directory (with --endpoint)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l endpoint -d 'The plugin\'s socket name in --dir, as it registers it (e.g. nvidia-gpu.sock)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l timeout -d 'Deadline of the call; for `watch`, how long to watch [default: 10s; watch: until stopped]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l connect-timeout -d 'Limit for connecting to the socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l max-recv-bytes -d 'Largest message accepted [default: the kubelet\'s 4 MiB]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l concurrency -d 'Requests in flight at most (1 to 1,000)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l connections -d 'HTTP/2 connections the requests share' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l duration -d 'How long to measure [default: 10s]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l total -d 'Measure this many requests instead of a duration' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l rate -d 'Open-loop arrival rate in requests per second (see below)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l warmup -d 'Load run first and not measured' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l devices-per-request -d 'Devices per Allocate / PreStartContainer request; the size asked of GetPreferredAllocation' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l compare -d 'A second plugin socket: both are loaded alternately (A, B, A, B) and the ratio B/A is printed' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l fail-if -d 'Fail (exit 1) when a condition holds, e.g. \'p99>5ms\', \'errors>0\', \'throughput<20000\'. Metrics: p50 p90 p99 p99.9 max mean errors violations throughput. Repeatable' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from options" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l socket -d 'The plugin\'s socket' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l dir -d 'The device-plugin directory (with --endpoint)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l endpoint -d 'The plugin\'s socket name in --dir, as it registers it (e.g. nvidia-gpu.sock)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l timeout -d 'Deadline of the call; for `watch`, how long to watch [default: 10s; watch: until stopped]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l connect-timeout -d 'Limit for connecting to the socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l max-recv-bytes -d 'Largest message accepted [default: the kubelet\'s 4 MiB]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l concurrency -d 'Requests in flight at most (1 to 1,000)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l connections -d 'HTTP/2 connections the requests share' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l duration -d 'How long to measure [default: 10s]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l total -d 'Measure this many requests instead of a duration' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l rate -d 'Open-loop arrival rate in requests per second (see below)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l warmup -d 'Load run first and not measured' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l devices-per-request -d 'Devices per Allocate / PreStartContainer request; the size asked of GetPreferredAllocation' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l compare -d 'A second plugin socket: both are loaded alternately (A, B, A, B) and the ratio B/A is printed' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l fail-if -d 'Fail (exit 1) when a condition holds, e.g. \'p99>5ms\', \'errors>0\', \'throughput<20000\'. Metrics: p50 p90 p99 p99.9 max mean errors violations throughput. Repeatable' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from prestart" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l socket -d 'The plugin\'s socket' -r -f -a '(__dpctl_sockets)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l dir -d 'The device-plugin directory (with --endpoint)' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l endpoint -d 'The plugin\'s socket name in --dir, as it registers it (e.g. nvidia-gpu.sock)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l timeout -d 'Deadline of the call; for `watch`, how long to watch [default: 10s; watch: until stopped]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l connect-timeout -d 'Limit for connecting to the socket' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l max-recv-bytes -d 'Largest message accepted [default: the kubelet\'s 4 MiB]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l concurrency -d 'Requests in flight at most (1 to 1,000)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l connections -d 'HTTP/2 connections the requests share' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l duration -d 'How long to measure [default: 10s]' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l total -d 'Measure this many requests instead of a duration' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l rate -d 'Open-loop arrival rate in requests per second (see below)' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l warmup -d 'Load run first and not measured' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l devices-per-request -d 'Devices per Allocate / PreStartContainer request; the size asked of GetPreferredAllocation' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l compare -d 'A second plugin socket: both are loaded alternately (A, B, A, B) and the ratio B/A is printed' -r -F
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l fail-if -d 'Fail (exit 1) when a condition holds, e.g. \'p99>5ms\', \'errors>0\', \'throughput<20000\'. Metrics: p50 p90 p99 p99.9 max mean errors violations throughput. Repeatable' -r
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l churn -d 'Flip one device Unhealthy and back, one change at a time, and time each change until its message is decoded. Needs a `dpctl mock-plugin` (health is changed through its control socket)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand bench; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand completions" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand completions" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand completions" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand completions" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand completions" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand completions" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand completions" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand options" -s V -l version -d 'Print version'
complete -c dpctl -n "__fish_dpctl_using_subcommand help" -s o -l output -d 'Output format: table for people, json for programs (JSON Lines for streams)' -r -f -a "table\t'Aligned columns for people'
wide\t'Like `table`, with more columns'
json\t'JSON with stable snake_case keys; JSON Lines for streams'
yaml\t'The JSON data as YAML; a document per event for streams'"
complete -c dpctl -n "__fish_dpctl_using_subcommand help" -l color -d 'When to color the output' -r -f -a "auto\t'When stdout is a terminal and NO_COLOR is unset'
always\t'Always'
never\t'Never'"
complete -c dpctl -n "__fish_dpctl_using_subcommand help" -s v -l verbose -d 'More detail on stderr. plugin call|watch|check, smoke and kubelet-sim show each gRPC call to a plugin as grpcurl -v does: -v the method, each request and response message as JSON, the status and the latency; -vv adds the request and response headers and the trailers; -vvv prints long messages whole. With -o json, one JSON line per event. Logging rises too (-v info, -vv debug, -vvv trace)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help" -s q -l quiet -d 'Only errors on stderr; no progress display'
complete -c dpctl -n "__fish_dpctl_using_subcommand help" -l no-trunc -d 'Never shorten table cells (they are shortened only when stdout is a terminal)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help" -l no-headers -d 'Tables without their header line (for `| awk`, as kubectl\'s --no-headers)'
complete -c dpctl -n "__fish_dpctl_using_subcommand help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c dpctl -n "__fish_dpctl_using_subcommand help" -s V -l version -d 'Print version'

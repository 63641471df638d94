package netlab_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/hetcomm/hetcomm/internal/netlab"
)

func Example() {
	topo, err := netlab.Parse(strings.NewReader(`{
		"name": "demo",
		"bridges": [{"name": "lan"}],
		"hosts": [
			{"name": "fast", "nics": [{"bridge": "lan", "rate_out": 400, "rate_in": 400}]},
			{"name": "slow", "nics": [{"bridge": "lan", "rate_out": 20, "rate_in": 50, "loss": 1}]}
		]
	}`))
	if err != nil {
		log.Fatal(err)
	}
	addrs, _ := topo.HostAddrs()
	fmt.Println("slow is at", addrs["slow"][0])
	r, _ := topo.ExpectedRate("fast", "slow")
	fmt.Println("fast -> slow:", r, "Mbit/s")
	r, _ = topo.ExpectedRate("slow", "fast")
	fmt.Println("slow -> fast:", r, "Mbit/s")

	// The commands Up would run as root (here: the shaping of slow's NIC).
	cmds, _ := topo.UpCommands(netlab.Prefix(topo.Name))
	for _, c := range cmds {
		if s := c.String(); strings.Contains(s, "classid 1:1 ") && (strings.Contains(s, "h1e0") || strings.Contains(s, "nl-demo.slow")) {
			fmt.Println(s)
		}
	}

	_, err = netlab.Parse(strings.NewReader(`{"name": "demo", "bridges": [{"name": "lan"}],
		"hosts": [{"name": "a", "nics": [{"bridge": "wan", "rate_out": 1, "rate_in": 1}]}]}`))
	fmt.Println(err)
	// Output:
	// slow is at 10.77.1.2
	// fast -> slow: 50 Mbit/s
	// slow -> fast: 20 Mbit/s
	// tc -n nl-demo.slow class add dev eth0 parent 1: classid 1:1 htb rate 20000000bit ceil 20000000bit burst 16000 cburst 16000 quantum 2500
	// tc -n nl-demo_sw class add dev h1e0 parent 1: classid 1:1 htb rate 50000000bit ceil 50000000bit burst 16000 cburst 16000 quantum 6250
	// netlab: topology: host "a" nics[0]: unknown bridge "wan"
}

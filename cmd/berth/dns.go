package main

import (
	"fmt"
	"net/netip"

	"github.com/spf13/cobra"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	"github.com/berthhq/berth/services/scheduler/cloudmap/cloudmapdns"
	"github.com/berthhq/berth/services/scheduler/platform/keys"
)

func dnsCommand() *cobra.Command {
	var etcdf etcdFlags
	var addr, account, region, upstreams string
	var lbAddrs []string
	cmd := &cobra.Command{
		Use:   "dns",
		Short: "Run the Cloud Map DNS server: answer one account's private DNS namespaces",
		Long: "Follows the Cloud Map namespaces, services and instances kept in etcd and answers the\n" +
			"private DNS namespaces of --account in --region (A and SRV records with each service's\n" +
			"TTL) and, with --lb-address, each ELBv2 load balancer's DNSName; other names are\n" +
			"forwarded to --upstreams (default: /etc/resolv.conf). Agents point\n" +
			"their tasks at it with BERTH_DNS_TARGET (see docs/service-discovery.md).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if account == "" || region == "" {
				return fmt.Errorf("--account and --region are required: a DNS question carries no account")
			}
			log := cli.JSONLogger(cmd)
			etcd, err := etcdf.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer etcd.Close()
			cfg := cloudmapdns.Config{Addr: addr, Scopes: []keys.Scope{{Account: account, Region: region}}, Logger: log}
			for _, ip := range lbAddrs {
				a, err := netip.ParseAddr(ip)
				if err != nil || !a.Is4() {
					return fmt.Errorf("--lb-address %q: an IPv4 address is needed", ip)
				}
				cfg.LoadBalancerAddrs = append(cfg.LoadBalancerAddrs, a)
			}
			if upstreams != "" {
				cfg.Upstreams = cli.SplitList(upstreams)
			}
			return cloudmapdns.Run(cmd.Context(), etcd, cfg, func(a string) {
				log.Info("dns answering", "addr", a, "account", account, "region", region, "etcd", etcdf.endpoints)
			})
		},
	}
	f := cmd.Flags()
	etcdf.add(f)
	f.StringVar(&addr, "listen", cli.Env("BERTH_DNS_ADDR", "127.0.0.1:5353"), "UDP and TCP address to answer on")
	f.StringVar(&account, "account", cli.Env("BERTH_ACCOUNT_ID", ""), "account whose private DNS namespaces are answered")
	f.StringVar(&region, "region", cli.Env("BERTH_REGION", ""), "region of those namespaces")
	f.StringSliceVar(&lbAddrs, "lb-address", cli.SplitList(cli.Env("BERTH_DNS_LB_ADDRESSES", "")), "IPv4 address of a host running `berth lb` (repeatable, or comma-separated in BERTH_DNS_LB_ADDRESSES): each load balancer's DNSName answers them")
	f.StringVar(&upstreams, "upstreams", cli.Env("BERTH_DNS_UPSTREAMS", ""), "resolvers (ip:port, comma-separated) other names are forwarded to")
	return cmd
}

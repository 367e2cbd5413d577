package main

import (
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/berthhq/berth/cmd/berth/internal/cli"
	adminv1 "github.com/berthhq/berth/gen/berth/admin/v1"
	"github.com/berthhq/berth/gen/berth/admin/v1/adminv1connect"
	"github.com/berthhq/berth/pkg/pki"
)

// adminCommand manages accounts and access keys through a scheduler's AdminService.
func adminCommand() *cobra.Command {
	var schedulerURL, token, dataDir string
	var files pki.Files
	client := func() adminv1connect.AdminServiceClient {
		schedulerURL, token := adminTarget(schedulerURL, token, dataDir)
		hc, err := cli.HTTPClient(schedulerURL, files)
		if err != nil {
			hc = &http.Client{Transport: failing{err}}
		} else if token != "" {
			hc.Transport = bearer{next: hc.Transport, token: token}
		}
		return adminv1connect.NewAdminServiceClient(hc, schedulerURL)
	}
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Manage accounts and access keys (talks to a scheduler's internal listener)",
	}
	cmd.PersistentFlags().StringVar(&schedulerURL, "scheduler-url", cli.Env("BERTH_SCHEDULER_URL", ""), "base URL of a scheduler replica (https:// with --tls-*); default: the `berth dev` running on --data-dir, else "+defaultSchedulerURL)
	cmd.PersistentFlags().StringVar(&token, "token", cli.Env("BERTH_ADMIN_TOKEN", ""), "the admin bootstrap token the scheduler printed at its first start (or use an admin-role --tls-cert); default: the dev admin token of --data-dir when talking to that `berth dev`")
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", cli.Env("BERTH_DATA_DIR", "./.berth"), "data dir of a running `berth dev`, whose internal listener URL and admin token (0600) `berth admin` uses")
	cli.AddTLSFlags(cmd.PersistentFlags(), &files, "presented to the scheduler (role admin authorizes without --token)")

	account := &cobra.Command{Use: "account", Short: "Create, list and delete accounts"}
	var accountName string
	createAccount := &cobra.Command{
		Use:   "create [ID]",
		Short: "Create an account (a 12-digit id is generated when ID is omitted)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &adminv1.CreateAccountRequest{Name: accountName}
			if len(args) == 1 {
				req.Id = args[0]
			}
			res, err := client().CreateAccount(cmd.Context(), connect.NewRequest(req))
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), res.Msg.GetAccount().GetId())
			return nil
		},
	}
	createAccount.Flags().StringVar(&accountName, "name", "", "a label for operators")
	listAccounts := &cobra.Command{
		Use:   "list",
		Short: "List accounts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := client().ListAccounts(cmd.Context(), connect.NewRequest(&adminv1.ListAccountsRequest{}))
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tNAME\tCREATED")
			for _, a := range res.Msg.GetAccounts() {
				fmt.Fprintf(w, "%s\t%s\t%s\n", a.GetId(), a.GetName(), a.GetCreatedAt().AsTime().Format("2006-01-02T15:04:05Z"))
			}
			return w.Flush()
		},
	}
	deleteAccount := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete an account and its access keys",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := client().DeleteAccount(cmd.Context(), connect.NewRequest(&adminv1.DeleteAccountRequest{Id: args[0]}))
			return err
		},
	}
	account.AddCommand(createAccount, listAccounts, deleteAccount)

	key := &cobra.Command{Use: "key", Short: "Issue, list and delete access keys"}
	var instanceARN, description, output string
	createKey := &cobra.Command{
		Use:   "create ACCOUNT",
		Short: "Issue an access key; --container-instance scopes it to one agent",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := client().CreateAccessKey(cmd.Context(), connect.NewRequest(&adminv1.CreateAccessKeyRequest{
				AccountId: args[0], ContainerInstanceArn: instanceARN, Description: description,
			}))
			if err != nil {
				return err
			}
			id, secret := res.Msg.GetAccessKey().GetAccessKeyId(), res.Msg.GetSecretAccessKey()
			if output == "env" {
				fmt.Fprintf(cmd.OutOrStdout(), "BERTH_ACCESS_KEY_ID=%s\nBERTH_SECRET_ACCESS_KEY=%s\n", id, secret)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", id, secret)
			return nil
		},
	}
	createKey.Flags().StringVar(&instanceARN, "container-instance", "", "container instance ARN the key may act as (an agent credential)")
	createKey.Flags().StringVar(&description, "description", "", "a label for operators")
	createKey.Flags().StringVar(&output, "output", "text", "text (ID<TAB>SECRET) or env (a --credentials-file for berth agent)")
	listKeys := &cobra.Command{
		Use:   "list ACCOUNT",
		Short: "List an account's access keys (secrets are never shown again)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := client().ListAccessKeys(cmd.Context(), connect.NewRequest(&adminv1.ListAccessKeysRequest{AccountId: args[0]}))
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ACCESS KEY ID\tCONTAINER INSTANCE\tDESCRIPTION")
			for _, k := range res.Msg.GetAccessKeys() {
				fmt.Fprintf(w, "%s\t%s\t%s\n", k.GetAccessKeyId(), k.GetContainerInstanceArn(), k.GetDescription())
			}
			return w.Flush()
		},
	}
	deleteKey := &cobra.Command{
		Use:   "delete ACCESS_KEY_ID",
		Short: "Delete an access key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := client().DeleteAccessKey(cmd.Context(), connect.NewRequest(&adminv1.DeleteAccessKeyRequest{AccessKeyId: args[0]}))
			return err
		},
	}
	key.AddCommand(createKey, listKeys, deleteKey)
	cmd.AddCommand(account, key)
	return cmd
}

// defaultSchedulerURL is the scheduler's internal listener on this host
// (`berth scheduler`'s default --listen).
const defaultSchedulerURL = "http://127.0.0.1:4567"

// adminTarget is the scheduler URL and token `berth admin` uses: those given, with the
// running `berth dev` of dataDir filling in what is missing: its URL when none is given,
// its admin token when the URL is its own and no token is given. The dev token is never
// sent to another scheduler.
func adminTarget(schedulerURL, token, dataDir string) (string, string) {
	devURL, devToken, ok := devAdminTarget(dataDir)
	if schedulerURL == "" {
		if !ok {
			return defaultSchedulerURL, token
		}
		schedulerURL = devURL
	}
	if ok && token == "" && strings.TrimRight(schedulerURL, "/") == devURL {
		token = devToken
	}
	return schedulerURL, token
}

// bearer adds "Authorization: Bearer <token>" to every request.
type bearer struct {
	next  http.RoundTripper
	token string
}

// RoundTrip implements http.RoundTripper.
func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// failing answers every request with err (a client whose TLS setup failed).
type failing struct{ err error }

// RoundTrip implements http.RoundTripper.
func (f failing) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

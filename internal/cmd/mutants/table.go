package main

import "slices"

// table is the list of mutants, each a bug some test must catch, grouped by
// the package of the code it mutates (table_root.go, table_internal.go,
// table_mcpauth.go, table_providers.go, table_temporal.go) and, within one, by file. Old is the
// exact current text (it must occur once in File); when the code moves, the
// run reports the entry stale and it is rewritten against the new code in
// the same commit. Pkg "" is the root package, Run "" is every test of Pkg.
func table() []mutant {
	return slices.Concat(aheadMutants(), aheadlimitsMutants(), authdetailsMutants(), bindingMutants(), clientMutants(), connectionsMutants(), connectionsapiMutants(), dpopMutants(), encryptionMutants(), engineMutants(), eventsMutants(), handlersMutants(), kvMutants(), moduleMutants(), oauthMutants(), oauthworkflowMutants(), reconnectMutants(), recordsMutants(), refreshMutants(), registryMutants(), sessionMutants(), signinMutants(), tokenstoreMutants(), clientauthAssertionMutants(), clientauthKeyMutants(), authserverAssertionMutants(), authserverClientauthMutants(), errsMutants(), flightMutants(), keyspaceMutants(), kvBatchMutants(), kvIndexMutants(), kvMemoryMutants(), kvRedisMutants(), kvReplicasMutants(), kvScanMutants(), kvShardsClaimMutants(), kvShardsRedisMutants(), layoutWaitsMutants(), leaseMutants(), outboundRedirectsMutants(), ratelimitMutants(), runstoreMutants(), sealMutants(), webAnswerMutants(), webPageMutants(), webMutants(), webAssetsCallbackMutants(), webAssetsOauthPromptMutants(), webAssetsOauthConnectionsMutants(), workerMutants(), mcpauthAddrclassMutants(), mcpauthClientcredsMutants(), mcpauthClientsMutants(), mcpauthConnectorMutants(), mcpauthDiscoveryMutants(), mcpauthDpopgrantsMutants(), mcpauthMigrationMutants(), mcpauthOutboundMutants(), mcpauthProviderMutants(), mcpauthRecordsMutants(), mcpauthRegisterMutants(), mcpauthRegistrationMutants(), mcpauthSdkMutants(), mcpauthTransportMutants(), mcpauthWorkloadMutants(), providersAccountMutants(), providersCatalogMutants(), providersClientauthMutants(), providersConfigMutants(), providersDeviceMutants(), providersDiscoverMutants(), providersFapiMutants(), providersOauth2Mutants(), providersParMutants(), providersTokenresponseMutants(), providersWireMutants(), temporalActivitiesMutants(), temporalDeviceMutants(), temporalOwnerMutants(), temporalSignInMutants(), temporalStashMutants())
}

module github.com/oauthflow/oauthflow

go 1.26.8

require golang.org/x/oauth2 v0.37.0

# frozen_string_literal: true

Rails.application.routes.draw do
  resources :products, only: %i[index show]
  get "/slow" => "products#slow"
  # What Fathom::Labels holds in an action, a job and a route without a
  # controller (FATHOM_ENDPOINT_LABELS=1; test/rails/endpoint_labels_test.rb).
  get "/products/:id/labels" => "products#labels"
  get "/probes/:id/labels" => proc { [200, { "content-type" => "application/json" }, [LabelsProbeJob.seen.to_json]] }
  # Burns ?ms= of this thread's CPU; X-Cpu-Ns says how much it used
  # (test/rails/push_cluster_test.rb sums them against the endpoint label).
  get "/burn" => "products#burn"
  get "/up" => proc { [200, { "content-type" => "text/plain" }, ["ok"]] }
  root "products#index"
end

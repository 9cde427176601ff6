# frozen_string_literal: true

Rails.application.routes.draw do
  resources :products, only: %i[index show] do
    get :shipping, on: :member
  end
  resources :orders, only: %i[create show]
  root "products#index"
end
